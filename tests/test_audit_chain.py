"""Issue 31, failure 7: the collaboration log out of the agents' reach, and tamper-evident.

The log lives in ``<home>/logs/<project>/``, outside the project folder the agents'
file tools work in; each line carries a hash chain, and ``teamgraph log verify``
names the first altered, missing, unchained or unindexed line (exit code 1), or says OK.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest
from audit_fixtures import CONFIG, LEADER_TURN, log_files, log_lines, login_team
from conftest import FakeClock
from scripting import act, call
from typer.testing import CliRunner

import teamgraph.audit.log as audit_log
from teamgraph.audit import flush_log, parse_line, read_log
from teamgraph.audit.chain import split_chain, verify_folder
from teamgraph.audit.log import INDEX_FILE, append_events
from teamgraph.audit.records import LINE_RE, LogEvent
from teamgraph.cli import app

runner = CliRunner()
DAY_FILE = "2030-01-01_login_collaboration.log"  # FakeClock's day, project "login"
ESCAPES = [f"../../logs/login/{DAY_FILE}", f"{Path('..').as_posix()}/../logs/login/.collaboration.sqlite"]

INTRUDER = {
    "Team Leader": [act(call("create_sub_agent", role_id="ui-operator", task="Tidy the logs.")), *[LEADER_TURN] * 8],
    "UI Operator_1": [
        act(call("list_files", path=".")),
        act(*(call("read_file", path=path) for path in ESCAPES)),
        act(*(call("write_file", path=path, content="erased") for path in ESCAPES)),
        act(call("write_file", path=f"logs/{DAY_FILE}", content="a file of the project, not the log")),
        "Logs tidied.",
    ],
}


@pytest.fixture
def chained_run(tmp_path):
    team = login_team(tmp_path / "home", clock=FakeClock())
    team.compile().invoke({"messages": [("user", "Build a login page")]}, CONFIG)
    flush_log(team, CONFIG)
    return team


def _verify(home: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["log", "verify", "login", "--home", str(home)])
    return result.exit_code, result.output.replace("\n", " ")


def _folder(home: Path) -> Path:
    return home / "logs" / "login"


def test_failure_7_the_log_lives_outside_the_project_folder_the_agents_write(tmp_path):
    team = login_team(tmp_path / "home", clock=FakeClock(), script=INTRUDER)
    team.compile().invoke({"messages": [("user", "Build a login page")]}, CONFIG)
    flush_log(team, CONFIG)
    project = tmp_path / "home" / "project" / "login"
    assert (_folder(team.home) / DAY_FILE).is_file() and (_folder(team.home) / INDEX_FILE).is_file()
    assert not (project / "logs" / ".collaboration.sqlite").exists()
    results = [m for m in team.history(CONFIG, "UI Operator_1") if m.type == "tool"]
    escaped = [m for m in results if m.name in ("read_file", "write_file") and "erased" not in str(m.content)]
    assert [m.status for m in escaped[:4]] == ["error"] * 4  # both reads and both writes outside: refused
    logged = (_folder(team.home) / DAY_FILE).read_text().splitlines()
    assert len(logged) > 8 and all(LINE_RE.match(line) for line in logged)  # not replaced: the attempts are in it
    assert (project / "logs" / DAY_FILE).read_text() == "a file of the project, not the log"
    code, output = _verify(team.home)
    assert code == 0 and output.startswith("OK:"), output


def test_failure_7_every_line_carries_its_number_and_a_hash_of_the_line_before(chained_run):
    lines = log_lines(chained_run.home)
    assert [split_chain(line)[1] for line in lines] == list(range(1, len(lines) + 1))
    assert len({split_chain(line)[2] for line in lines}) == len(lines)
    assert all(LINE_RE.match(line) for line in lines)  # the seed's seven fields, then the chain's
    # the readers keep working: parse_line, read_log, export and stats read chained lines
    assert [e.content for e in read_log(chained_run, CONFIG)] == [parse_line(x).content for x in lines]


def test_failure_7_log_verify_says_ok_for_an_intact_log(chained_run):
    code, output = _verify(chained_run.home)
    assert code == 0 and output.startswith(f"OK: {len(log_lines(chained_run.home))} lines in 1 day files"), output


def _rewrite(path: Path, edit) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("".join(f"{line}\n" for line in edit(lines)), encoding="utf-8")


@pytest.mark.parametrize(
    ("edit", "kind", "line"),
    [
        (lambda ls: [*ls[:4], ls[4].replace("success", "failed", 1), *ls[5:]], "ALTERED", 5),
        (lambda ls: [*ls[:4], ls[4].replace("] [", "] [x", 1), *ls[5:]], "ALTERED", 5),
        (lambda ls: [*ls[:6], *ls[7:]], "MISSING", 7),
        (lambda ls: [*ls[:2], *ls[5:]], "MISSING", 3),
        (lambda ls: ls[:-2], "MISSING", -1),
        (lambda ls: [*ls[:3], split_chain(ls[3])[0], *ls[4:]], "UNCHAINED", 4),
        (lambda ls: [*ls, ls[-1]], "ALTERED", 0),
        (lambda ls: [*ls[:3], ls[4], ls[3], *ls[5:]], "MISSING", 4),
    ],
    ids=[
        "result-changed",
        "sender-changed",
        "one-removed",
        "three-removed",
        "cut-at-end",
        "hash-dropped",
        "last-repeated",
        "two-swapped",
    ],  # fmt: skip
)
def test_failure_7_log_verify_reports_the_first_altered_or_missing_line(chained_run, edit, kind, line):
    (day,) = log_files(chained_run.home)
    total = len(log_lines(chained_run.home))
    _rewrite(day, edit)
    code, output = _verify(chained_run.home)
    expected = {-1: total - 1, 0: total + 1}.get(line, line)
    assert code == 1, output
    assert f"{kind}: " in output and f"{DAY_FILE}, line {expected}:" in output, output


def test_failure_7_log_verify_reports_lines_added_with_a_recomputed_chain(chained_run):
    from teamgraph.audit.chain import chain_lines

    (day,) = log_files(chained_run.home)
    *_, last = day.read_text(encoding="utf-8").splitlines()
    text, number, digest = split_chain(last)
    forged, _, _ = chain_lines([text.replace("success", "failed")], previous=str(digest), count=int(str(number)))
    with day.open("a", encoding="utf-8") as handle:
        handle.write(forged[0] + "\n")
    code, output = _verify(chained_run.home)
    assert code == 1 and "UNINDEXED: " in output and f"line {number + 1}:" in output, output


def test_failure_7_log_verify_reports_a_removed_day_file_and_a_removed_index(chained_run):
    folder = _folder(chained_run.home)
    (day,) = log_files(chained_run.home)
    kept = day.read_bytes()
    day.unlink()
    code, output = _verify(chained_run.home)
    assert code == 1 and "MISSING: " in output and "whole file" in output, output
    day.write_bytes(kept)
    (folder / INDEX_FILE).rename(folder / "elsewhere")
    code, output = _verify(chained_run.home)
    assert code == 1 and "UNINDEXED: " in output, output


def test_failure_7_log_verify_of_a_thread_without_a_log_is_an_error(tmp_path):
    code, output = _verify(tmp_path / "home")
    assert code == 1 and "No collaboration log for thread 'login'" in output


def test_log_show_prints_the_lines(chained_run):
    result = runner.invoke(app, ["log", "show", "login", "--home", str(chained_run.home)])
    assert result.exit_code == 0 and result.output.splitlines() == log_lines(chained_run.home)


# --------------------------------------------------------------------------- the chain through recovery

NOW = datetime(2030, 1, 2, 9, 0, 0)


def _events(n: int):
    def derive(cursor):
        return [
            LogEvent(time="2030-01-02 09:00:00", sender="user", receiver="x", kind="task", content=f"t{i}")
            for i in range(n)
        ], cursor

    return derive


def test_the_chain_goes_on_after_a_crash_tail_is_cut_and_after_a_lost_tail(tmp_path):
    logs = tmp_path / "logs"
    append_events(logs, "p", "t", NOW, _events(3))
    (day,) = logs.glob("*.log")
    with day.open("a", encoding="utf-8") as handle:
        handle.write("a line whose transaction never committed | #4 h=0000000000000000\n")
    audit_log._forget_open_indexes()  # NOTE: as in a new process
    append_events(logs, "p", "t", NOW, _events(2))
    assert verify_folder(logs, index_file=INDEX_FILE).problem is None
    day.write_text("".join(f"{x}\n" for x in day.read_text().splitlines()[:2]))  # a power cut lost 3 lines
    audit_log._forget_open_indexes()
    append_events(logs, "p", "t", NOW, _events(1))
    codes = [parse_line(x).code for x in day.read_text().splitlines()]
    assert codes == ["", "", "LOG_LOST", ""]
    verdict = verify_folder(logs, index_file=INDEX_FILE)
    assert verdict.problem is None and verdict.lines == 4


def test_a_copied_log_folder_verifies_on_its_own(chained_run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(_folder(chained_run.home), copy)
    assert verify_folder(copy, index_file=INDEX_FILE).problem is None
