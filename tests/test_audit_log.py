"""The collaboration log: format, coverage, redaction, files, rotation, exactly once after kill -9."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tarfile
import textwrap
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from audit_fixtures import CONFIG, SECRETS, log_files, log_lines, login_team
from conftest import FakeClock
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.types import Command
from scripting import act, call

from teamgraph import Policy
from teamgraph.audit import LINE_RE, flush_log, parse_line, read_log, redact, redact_value
from teamgraph.audit.project import project_name


@pytest.fixture
def login_run(tmp_path):
    clock = FakeClock()
    team = login_team(tmp_path / "home", clock=clock)
    team.compile().invoke({"messages": [("user", f"Build a login page. password={SECRETS[1]}")]}, CONFIG)
    flush_log(team, CONFIG)
    return team


def test_every_line_matches_the_spec_format(login_run):
    lines = log_lines(login_run.home)
    assert lines
    for line in lines:
        assert LINE_RE.match(line), line
    (path,) = log_files(login_run.home)
    assert path.name == "2030-01-01_login_collaboration.log"
    assert all(line.startswith("[2030-01-01 09:00:00] [") for line in lines)


def test_the_log_has_every_call_task_file_and_tool_event_with_its_result(login_run):
    events = [parse_line(line) for line in log_lines(login_run.home)]
    by = {(e.sender, e.receiver, e.kind, re.split(r"[(:]", e.content)[0].strip(), e.result) for e in events}
    assert ("user", "Team Leader", "task", "task", "success") in by
    assert ("Team Leader", "system", "task", "create_sub_agent", "success") in by
    assert ("Team Leader", "UI Operator_1", "task", "created UI Operator_1", "success") in by
    assert ("UI Operator_1", "files", "file", "write_file", "success") in by
    assert ("UI Operator_1", "files", "file", "read_file", "failed") in by
    assert ("UI Operator_1", "Team Leader", "call", "ask_1 ask opened", "success") in by
    assert ("Team Leader", "UI Operator_1", "call", "ask_1 answered", "success") in by
    assert ("UI Operator_1", "Team Leader", "call", "reply", "success") in by
    assert ("Team Leader", "user", "call", "reply", "success") in by
    failed = next(e for e in events if e.content.startswith("read_file"))
    assert (failed.level, failed.code) == ("ERROR", "TOOL_ERROR")
    assert "missing.txt" in failed.error
    delivered = [e for e in events if e.content.startswith("message msg_")]
    assert len(delivered) == len({e.content for e in delivered}) >= 3
    assert all(e.level == "INFO" and e.error == "" for e in events if e.result == "success")


def test_no_secret_reaches_a_log_line(login_run):
    text = "\n".join(log_lines(login_run.home))
    assert "***" in text
    for secret in SECRETS:
        assert secret not in text
    history = "\n".join(str(m.content) for m in login_run.history(CONFIG, "UI Operator_1"))
    assert SECRETS[0] in history  # the agents still see what they were given


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("key sk-proj-AbC123xyz789012345", "AbC123xyz789012345"),
        ("Authorization: Bearer eyJhbGciOi.J9.xyz", "eyJhbGciOi"),
        ("password=hunter2 and more", "hunter2"),
        ('{"api_key": "abc-123-def"}', "abc-123-def"),
        ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----", "MIIEow"),
        ("client_secret: s3cr3t!", "s3cr3t!"),
    ],
)
def test_redact_masks_each_secret_shape(text, secret):
    assert secret not in redact(text)


def test_redact_value_masks_values_of_secret_named_keys():
    clean = redact_value({"path": "a.txt", "db_password": "plain words", "nested": [{"Token": 42}]})
    assert clean == {"path": "a.txt", "db_password": "***", "nested": [{"Token": "***"}]}


def test_log_files_are_private(login_run):
    folder = login_run.home / "logs" / "login"
    for path in [*log_files(login_run.home), folder / ".collaboration.sqlite"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_policy_log_off_writes_no_log(tmp_path):
    team = login_team(tmp_path / "home", policy=Policy(log=False))
    team.compile().invoke({"messages": [("user", "Build a login page")]}, CONFIG)
    assert flush_log(team, CONFIG) == []
    assert not (tmp_path / "home" / "logs" / "login").exists()


def test_a_second_flush_writes_nothing(login_run):
    before = log_lines(login_run.home)
    assert flush_log(login_run, CONFIG) == []
    assert log_lines(login_run.home) == before


def test_project_name_comes_from_the_config_or_the_team_or_the_thread():
    assert project_name({"configurable": {"thread_id": "t 1/x"}}) == "t_1_x"
    assert project_name({"configurable": {"thread_id": "t1", "project_name": "web"}}) == "web"
    assert project_name({"configurable": {"thread_id": "t1"}}, "acme") == "acme"
    assert project_name({"configurable": {"thread_id": "t1", "project_name": "web"}}, "acme") == "web"
    with pytest.raises(ValueError, match="project_name"):
        project_name({"configurable": {}})


def test_a_teams_project_holds_its_log_beside_its_folder_and_the_cli_finds_it(tmp_path):
    """``Team(project=...)`` names the project of every thread: its files and its log alike.

    The thread records it, so the CLI finds the log without being told the project.
    """
    from typer.testing import CliRunner

    from teamgraph.cli import app

    team = login_team(tmp_path / "home", project="acme")
    team.compile().invoke({"messages": [("user", "Build a login page.")]}, CONFIG)
    flush_log(team, CONFIG)
    assert team.runtime.project_folder(CONFIG) == tmp_path / "home" / "project" / "acme"
    assert log_files(tmp_path / "home", "acme") and not (tmp_path / "home" / "logs" / "login").exists()
    assert {event.kind for event in read_log(team, CONFIG)} >= {"task"}
    assert team.state(CONFIG)["team"]["project"] == "acme"  # NOTE: what the CLI resumes and reads it by
    home = str(tmp_path / "home")
    for named in (["--project", "acme"], []):
        shown = CliRunner().invoke(app, ["log", "show", "login", "--home", home, *named])
        assert shown.exit_code == 0 and LINE_RE.match(shown.output.splitlines()[0])
    out = tmp_path / "login.json"
    exported = CliRunner().invoke(app, ["export", "login", "--format", "json", "--out", str(out), "--home", home])
    assert exported.exit_code == 0 and json.loads(out.read_text())["log"]


PAUSED_SCRIPT = {
    "Team Leader": [act(call("create_sub_agent", role_id="ui-operator", task="Design two pages.")), *["Ready."] * 4],
    "UI Operator_1": [
        act(call("write_file", path="web/login.html", content="<form></form>")),
        act(call("ask_master", question="Which colour?")),
        act(call("write_file", path="web/signup.html", content="<form></form>")),
        "Both pages done.",
    ],
}
"""A member writes a page, asks the person, then writes another after the answer."""


@pytest.mark.parametrize("runtime", ["sync", "async"])
def test_a_resume_that_names_no_project_works_in_the_one_its_thread_recorded(tmp_path, runtime):
    """A resume sent without the first run's ``project_name`` (Studio, the SDK) keeps the thread's folder and log.

    The team's own project does not move it either: a thread keeps the project it started in.
    """
    team = login_team(tmp_path / "home", policy=Policy(ask="human"), script=PAUSED_SCRIPT, project="elsewhere")
    graph = team.compile()
    named = {"configurable": {"thread_id": "login", "project_name": "acme"}}
    out = graph.invoke({"messages": [("user", "Build the pages.")]}, named)
    assert list(out["__interrupt__"][0].value["requests"]) == ["ask_1"]
    resume = Command(resume={"ask_1": "Blue."})
    if runtime == "async":
        asyncio.run(graph.ainvoke(resume, CONFIG))
    else:
        graph.invoke(resume, CONFIG)
    acme = tmp_path / "home" / "project" / "acme"
    assert sorted(p.name for p in (acme / "web").iterdir()) == ["login.html", "signup.html"]
    assert sorted(p.name for p in (tmp_path / "home" / "project").iterdir()) == ["acme"]
    flush_log(team, CONFIG)
    assert sorted(p.name for p in (tmp_path / "home" / "logs").iterdir()) == ["acme"]
    logged = [event.content for event in read_log(team, CONFIG) if event.kind == "file"]
    assert any("signup.html" in content for content in logged)  # NOTE: written after the resume


def test_days_roll_over_old_files_are_archived_by_month_and_removed(tmp_path):
    clock = FakeClock()
    script = {"Team Leader": ["Noted."] * 10}
    team = login_team(tmp_path / "home", clock=clock, script=script)
    graph = team.compile()
    folder = tmp_path / "home" / "logs" / "login"

    def say(text: str) -> None:
        graph.invoke({"messages": [("user", text)]}, CONFIG)
        flush_log(team, CONFIG)

    say("day one")
    clock.advance(timedelta(days=1).total_seconds())
    say("day two")
    assert [p.name[:10] for p in log_files(team.home)] == ["2030-01-01", "2030-01-02"]
    assert "day two" in log_files(team.home)[1].read_text(encoding="utf-8")
    assert "day two" not in log_files(team.home)[0].read_text(encoding="utf-8")

    clock.advance(timedelta(days=44).total_seconds())  # 2030-02-15: January is over, its days > 30 days old
    say("february")
    archive = folder / "archive" / "2030-01_login_collaboration.tar.gz"
    with tarfile.open(archive) as packed:
        assert sorted(packed.getnames()) == ["2030-01-01_login_collaboration.log", "2030-01-02_login_collaboration.log"]
        text = packed.extractfile("2030-01-02_login_collaboration.log").read().decode()
        assert "day two" in text
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    assert [p.name[:10] for p in log_files(team.home)] == ["2030-02-15"]

    clock.advance(timedelta(days=181).total_seconds())  # 2030-08-15: January is 7 months old, February 6
    say("august")
    assert not archive.exists()
    assert (folder / "archive" / "2030-02_login_collaboration.tar.gz").exists()


# --- exactly once after kill -9 -------------------------------------------------

KILLED_RUN = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, sys.argv[4])
    from audit_fixtures import CONFIG, SECRETS, login_team
    from conftest import FakeClock
    import teamgraph.audit.log as audit_log
    from teamgraph.models.scripted import ScriptedChatModel

    mode, point = sys.argv[2], int(sys.argv[3])
    counts = {"append": 0, "model": 0}

    def kill_on(kind):
        counts[kind] += 1
        if counts[kind] == point:
            os.kill(os.getpid(), signal.SIGKILL)

    if mode == "append":  # killed after the lines are on disk, before the index commits
        original_append = audit_log._append
        def _append(path, lines, **kwargs):
            size = original_append(path, lines, **kwargs)
            kill_on("append")
            return size
        audit_log._append = _append
    else:  # killed in the middle of a superstep
        original_generate = ScriptedChatModel._generate
        def _generate(self, *args, **kwargs):
            kill_on("model")
            return original_generate(self, *args, **kwargs)
        ScriptedChatModel._generate = _generate

    team = login_team(sys.argv[1], clock=FakeClock())
    team.compile().invoke({"messages": [("user", "Build a login page. password=" + SECRETS[1])]}, CONFIG)
    sys.exit(3)  # the kill point was never reached
    """
)
KILL_POINTS = [
    ("append", 1),
    ("append", 2),
    ("append", 4),
    ("append", 5),
    ("append", 7),
    ("model", 1),
    ("model", 3),
    ("model", 5),
    ("model", 7),
    ("model", 9),
]


@pytest.mark.slow
def test_a_run_killed_at_ten_points_and_resumed_writes_each_line_once(tmp_path, login_run):
    expected = log_lines(login_run.home)
    assert len(expected) > 12
    module = tmp_path / "killed_run.py"
    module.write_text(KILLED_RUN, encoding="utf-8")
    tests_dir = str(Path(__file__).parent)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    homes = [tmp_path / f"{mode}{point}" for mode, point in KILL_POINTS]
    processes = [
        subprocess.Popen(
            [sys.executable, str(module), str(home), mode, str(point), tests_dir],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for home, (mode, point) in zip(homes, KILL_POINTS, strict=True)
    ]
    for process, point in zip(processes, KILL_POINTS, strict=True):
        _, err = process.communicate(timeout=120)
        assert process.returncode == -signal.SIGKILL, (point, err.decode()[-2000:])
    for home, point in zip(homes, KILL_POINTS, strict=True):
        team = login_team(home, clock=FakeClock())
        team.compile().invoke(None, CONFIG)  # resume the killed run
        flush_log(team, CONFIG)
        lines = log_lines(home)
        assert Counter(lines) == Counter(expected), point
        assert all(LINE_RE.match(line) for line in lines)


def test_a_pause_for_a_person_is_in_the_log_before_the_run_stops(tmp_path):
    from audit_fixtures import login_team
    from scripting import act, call

    script = {"Team Leader": [act(call("ask_user", question="Which colour?")), "Blue it is."]}
    team = login_team(tmp_path / "home", clock=FakeClock(), policy=Policy(), script=script)
    graph = team.compile()
    out = graph.invoke({"messages": [("user", "Build it")]}, CONFIG)
    assert out["__interrupt__"]
    events = [parse_line(line) for line in log_lines(team.home)]  # no flush: the gate wrote it
    opened = [e for e in events if e.content.startswith("ask_1 ask opened")]
    assert [(e.sender, e.receiver) for e in opened] == [("Team Leader", "human")]
    from langgraph.types import Command

    graph.invoke(Command(resume={"ask_1": "Blue"}), CONFIG)
    flush_log(team, CONFIG)
    lines = log_lines(team.home)
    assert len(lines) == len(set(lines))
    assert any(parse_line(line).content.startswith("ask_1 answered") for line in lines)


_SECRET_PIECES = [
    "password", "PassWd", "paſſword", "pwd", "secret", "token", "api_key", "Access-Key", "credential", "Bearer",
    "bearer", "sk-", "AKIA", "ASIA", "ghp_", "xoxb-", "Basic ", "basİc ", "Authorization: ", "://", "u:", "@", "/",
    "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
    "=", ": ", "\"", "'", " ", "\n", "x", "Z9", "abcdefghijklmnopqrstuvwxyz0123", "ABCDEFGHIJKLMNOP", "é", "K",
    "apı_key", "credentİal", "BEGİN", "ı", "İ",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SECRET_PIECES), max_size=12).map("".join))
def test_redaction_masks_what_every_pattern_would_mask(text: str) -> None:
    """The quick check that skips texts without a secret never skips one the patterns would mask."""
    from teamgraph.redaction import _PATTERNS, redact

    expected = text
    for pattern, replacement in _PATTERNS:
        expected = pattern.sub(replacement, expected)
    assert redact(text) == expected
