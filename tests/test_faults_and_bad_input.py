"""Issue 31, failures 10, 11 and 13: database faults and bad input, each a clear error or a recovery.

Each test is named after the failure it pins: a Team on PostgreSQL outlives a server
restart (10); an unknown database URL scheme is refused wherever a database is named
(11); bad ``Team()`` arguments and role files are errors that name what is wrong (13).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.tools import tool
from langgraph.types import Command
from pg_fixtures import restartable_postgres  # noqa: F401
from scripting import act, call
from typer.testing import CliRunner

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints import close_checkpointer, open_checkpointer
from teamgraph.cli import app
from teamgraph.roles import RoleFileError, parse_role_text

runner = CliRunner()
CONFIG = {"configurable": {"thread_id": "t1"}}
ASKING = {"Team Leader": [act(call("ask_user", question="Which colour?")), "Blue it is."]}


def _scripted(script: dict | None = None) -> ScriptedChatModel:
    return ScriptedChatModel(script or {"Team Leader": ["Done."]})


# --------------------------------------------------------------------------- failure 10


def test_failure_10_a_team_on_postgres_reconnects_after_the_server_restarts(restartable_postgres, tmp_path):  # noqa: F811
    url, restart = restartable_postgres
    team = Team(model=_scripted(ASKING), home=tmp_path, checkpointer=url)
    graph = team.compile()
    paused = graph.invoke({"messages": [("user", "Paint it")]}, CONFIG)
    assert list(paused["__interrupt__"][0].value["requests"]) == ["ask_1"]

    restart()  # every connection the Team held is closed by the server

    graph.invoke(Command(resume={"ask_1": "Blue"}), CONFIG)  # the same Team, the same graph
    assert team.history(CONFIG, "Team Leader")[-1].content == "Blue it is."
    assert not graph.get_state(CONFIG).next
    close_checkpointer(team.graph.checkpointer)


# --------------------------------------------------------------------------- failure 11

UNKNOWN_URLS = ["mysql://u:pw@h/db", "postgresql+psycopg://u@h/db", "sqlite://two-slashes.db", "redis://h:6379/0"]


@pytest.mark.parametrize("url", UNKNOWN_URLS)
def test_failure_11_an_unknown_url_scheme_in_team_checkpointer_is_refused(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"unknown database URL scheme") as caught:
        Team(model=_scripted(), home=tmp_path / "home", checkpointer=url)
    assert "Supported: postgresql://" in str(caught.value) and "sqlite:///" in str(caught.value)
    assert "pw" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # no file named after the URL, no home


@pytest.mark.parametrize("url", UNKNOWN_URLS)
def test_failure_11_an_unknown_url_scheme_in_teamgraph_db_is_refused(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEAMGRAPH_DB", url)
    with pytest.raises(ValueError, match=r"\$TEAMGRAPH_DB .*unknown database URL scheme"):
        open_checkpointer(home=tmp_path / "home")
    result = runner.invoke(app, ["threads", "--home", str(tmp_path / "home")])
    assert result.exit_code == 1 and "unknown database URL scheme" in result.stderr
    assert "Supported:" in result.stderr and "pw@" not in result.stderr
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


@pytest.mark.parametrize("url", UNKNOWN_URLS)
def test_failure_11_an_unknown_url_scheme_in_the_db_option_is_refused(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["--db", url, "threads", "--home", str(tmp_path / "home")])
    assert result.exit_code == 2, result.output  # a usage error, before any command runs
    assert "--db" in result.stderr and "Supported:" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "db", ["sqlite:///{tmp}/a.sqlite", "{tmp}/b.sqlite", "POSTGRESQL://u@127.0.0.1:9/x", "C:/teams/t.sqlite"]
)
def test_failure_11_supported_database_names_still_pass_the_check(db, tmp_path):
    from teamgraph.checkpoints.store import check_db

    assert check_db(db.format(tmp=tmp_path), source="--db") == db.format(tmp=tmp_path)


# --------------------------------------------------------------------------- failure 13: role files


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_failure_13_a_deeply_nested_role_file_is_a_role_file_error(opening, tmp_path):
    closing = {"[": "]", "{a: ": "}", "- ": ""}[opening]
    nested = opening * 3000 + "x" + closing * 3000
    text = f"---\nid: deep\ntools: {nested}\n---\nYou are deep.\n"
    with pytest.raises(RoleFileError) as caught:
        parse_role_text(text, source="deep.md")
    assert caught.value.path == "deep.md"
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "deep.md").write_text(text, encoding="utf-8")
    with pytest.raises(RoleFileError) as from_team:
        Team(model=_scripted(), home=tmp_path / "home", roles_dir=roles)
    assert from_team.value.path == str(roles / "deep.md")


def test_failure_13_a_missing_roles_dir_is_an_error(tmp_path):
    missing = tmp_path / "no-such-roles"
    with pytest.raises(RoleFileError) as caught:
        Team(model=_scripted(), home=tmp_path / "home", roles_dir=missing)
    assert caught.value.path == str(missing)
    result = runner.invoke(app, ["roles", "--roles-dir", str(missing), "--home", str(tmp_path / "home")])
    assert result.exit_code == 1 and str(missing) in result.stderr.replace("\n", "")


# --------------------------------------------------------------------------- failure 13: Team() arguments


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("model", 42),
        ("roles_dir", 3.5),
        ("policy", {"ask": "human"}),
        ("home", None),
        ("checkpointer", True),
        ("clock", "now"),
        ("tools", "write_file"),
        ("tools", [42]),
        ("token_counter", 7),
        ("prices", ["gpt"]),
        ("permissions", 12),
        ("project", 3),
    ],
)
def test_failure_13_a_wrong_typed_team_argument_is_a_type_error_naming_it(argument, value, tmp_path):
    arguments = {"model": _scripted(), "home": tmp_path / "home", argument: value}
    with pytest.raises(TypeError) as caught:
        Team(**arguments)
    assert f"Team({argument}=...)" in str(caught.value) and "takes" in str(caught.value)
    assert not (tmp_path / "home").exists()


@tool
def write_file(path: str, content: str) -> str:
    """A user's own file writer."""
    return f"{path}: {len(content)}"


@tool
def publish(text: str) -> str:
    """A user's own tool."""
    return text


@pytest.mark.parametrize("tools", [[write_file], {"*": [publish, write_file]}, {"coder": [write_file]}])
def test_failure_13_a_user_tool_named_like_a_builtin_is_an_error_naming_the_clash(tools, tmp_path):
    with pytest.raises(ValueError, match=r"'write_file' is the name of a built-in teamgraph tool"):
        Team(model=_scripted(), home=tmp_path / "home", tools=tools)
    assert Team(model=_scripted(), home=tmp_path / "home", tools=[publish]).runtime.extra_tools == {"*": [publish]}


# --------------------------------------------------------------------------- failure 13: a read-only home

_READ_ONLY_RUN = textwrap.dedent(
    """
    import sys
    from teamgraph import ScriptedChatModel, Team

    team = Team(model=ScriptedChatModel({"Team Leader": ["Again."]}), home=sys.argv[1])
    try:
        team.compile()
    except PermissionError as exc:
        print(exc)
        sys.exit(7)
    team.graph.invoke({"messages": [("user", "Again")]}, {"configurable": {"thread_id": "t2"}})
    """
)


def _run_on_read_only(home: Path, script: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``home`` read-only: a read-only bind mount as root, the mode bits otherwise."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, str(script), str(home)]
    if os.geteuid() != 0:
        home.chmod(0o555)
        try:
            return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        finally:
            home.chmod(0o755)
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "-m", "true"], capture_output=True) if unshare else None
    if probe is None or probe.returncode != 0:
        pytest.skip("running as root without a mount namespace: cannot make the home read-only for root")
    mount = f"mount --bind -o ro {home} {home} && exec {' '.join(map(str, command))}"
    return subprocess.run([str(unshare), "-m", "sh", "-c", mount], capture_output=True, text=True, env=env, timeout=120)


def test_failure_13_a_read_only_home_is_a_clear_error_before_the_run_starts(tmp_path):
    home = tmp_path / "home"
    Team(model=_scripted(), home=home).compile().invoke({"messages": [("user", "Hi")]}, CONFIG)
    script = tmp_path / "read_only_run.py"
    script.write_text(_READ_ONLY_RUN, encoding="utf-8")
    done = _run_on_read_only(home, script)
    assert done.returncode == 7, (done.returncode, done.stderr[-2000:])  # not SIGBUS, not a traceback
    assert str(home) in done.stdout and "cannot be written" in done.stdout


# --------------------------------------------------------------------------- a run's config and input


@pytest.mark.parametrize(
    "config", [None, {}, {"configurable": {"project_name": "p"}}], ids=["none", "empty", "no-thread"]
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_checkpointed_run_without_a_thread_is_refused_naming_thread_id(config, mode, tmp_path):
    # NOTE: LangGraph's own check saw the run key teamgraph adds; its saver then raised KeyError('thread_id').
    import asyncio

    team = Team(model=_scripted(), home=tmp_path)
    graph = team.compile()
    run = graph.invoke if mode == "sync" else (lambda i, c: asyncio.run(graph.ainvoke(i, c)))
    with pytest.raises(ValueError, match="thread_id"):
        run({"messages": [("user", "Hi")]}, config)
    assert list(graph.checkpointer.list(None)) == []  # nothing was run
    assert graph.invoke({"messages": [("user", "Hi")]}, CONFIG)["messages"][-1].content == "Done."


def test_a_run_without_a_checkpointer_needs_no_thread(tmp_path):
    graph = Team(model=_scripted(), home=tmp_path, checkpointer=False).compile()
    assert graph.invoke({"messages": [("user", "Hi")]})["messages"][-1].content == "Done."


@pytest.mark.parametrize("value", [{"msgs": [("user", "Hi")]}, {"messages": [("user", "Hi")], "agents": {}}])
def test_an_input_key_the_team_does_not_take_is_refused_and_changes_nothing(value, tmp_path):
    team = Team(model=_scripted(), home=tmp_path)
    graph = team.compile()
    with pytest.raises(ValueError, match="'messages'") as refused:
        graph.invoke(value, CONFIG)
    assert set(value) - {"messages"} <= set(str(refused.value).split("'"))
    assert graph.get_state(CONFIG).values == {}
    assert graph.invoke({"messages": [("user", "Hi")]}, CONFIG)["messages"][-1].content == "Done."


def test_a_thread_id_in_any_script_or_of_any_length_gets_a_folder_of_its_own(tmp_path):
    # NOTE: a Chinese thread id left nothing of the ASCII-only name ("No project name"), and a
    # 300-character one failed mid-run on a file name too long for the file system.
    team = Team(model=_scripted({"Team Leader": ["Done."] * 4}), home=tmp_path)
    graph = team.compile()
    threads = ["项目一", "项目二", "x" * 300, "y" * 300]
    for thread in threads:
        out = graph.invoke({"messages": [("user", "Hi")]}, {"configurable": {"thread_id": thread}})
        assert out["messages"][-1].content == "Done."
    folders = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert len(folders) == len(threads) and "项目一" in folders and "项目二" in folders
    assert all(len(name.encode()) <= 200 for name in folders)


@pytest.mark.parametrize(
    ("raw", "name"),
    [("t1", "t1"), ("a b/c", "a_b_c"), ("../../x", "x"), ("项目 v2", "v2"), ("项目一", "项目一"), ("...", None)],
)
def test_a_folder_name_is_the_one_earlier_versions_gave_whenever_they_gave_one(raw, name):
    from teamgraph.audit.project import folder_name

    assert folder_name(raw) == name


@pytest.mark.parametrize(("thread", "kind"), [("", "thread_id"), ("...", "project name")])
def test_a_thread_id_that_names_no_folder_is_refused_before_anything_is_written(thread, kind, tmp_path):
    graph = Team(model=_scripted(), home=tmp_path).compile()
    config = {"configurable": {"thread_id": thread}}
    with pytest.raises(ValueError, match=kind):
        graph.invoke({"messages": [("user", "Hi")]}, config)
    assert list(graph.checkpointer.list(None)) == []
