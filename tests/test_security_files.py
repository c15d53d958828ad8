"""Files kept in (issue 31, point 3): no link followed out of the project folder, private data, safe thread ids."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.cli import app
from teamgraph.messaging.envelopes import LEADER
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import errors
from teamgraph.tools.errors import ToolError
from teamgraph.tools.files import read_file, write_file
from tests.tools_fixtures import agent, context_for, run

WRITES = 600


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _swapper(project: Path, outside: Path, stop: threading.Event) -> None:
    """Swap ``project/sub`` between a real folder and a link to ``outside`` until stopped."""
    n = 0
    while not stop.is_set():
        sub = project / "sub"
        try:
            if sub.is_symlink():
                sub.unlink()
                sub.mkdir()
            else:
                n += 1
                sub.rename(project / f"old_{n}")
                sub.symlink_to(outside, target_is_directory=True)
        except OSError:
            continue  # NOTE: a write created sub meanwhile: swap again


def test_write_file_under_a_concurrently_swapped_symlink_stays_inside(tmp_path):
    """Failure 4: 600 writes while a thread swaps a folder for a link out; none lands outside."""
    runtime = TeamRuntime(home=tmp_path / "home", policy=Policy())
    agents = {LEADER: agent("team-leader"), "Researcher_1": agent("researcher")}
    context = context_for(runtime, "Researcher_1", agents=agents, config={"configurable": {"thread_id": "t1"}})
    project = runtime.project_folder(context.config)
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "sub").mkdir()
    stop = threading.Event()
    swapper = threading.Thread(target=_swapper, args=(project, outside, stop))
    swapper.start()
    codes = []
    try:
        for i in range(WRITES):
            try:
                run(write_file, context, path=f"sub/f{i}.txt", content="x")
                codes.append("ok")
            except ToolError as exc:
                codes.append(exc.code)
    finally:
        stop.set()
        swapper.join()
    assert list(outside.iterdir()) == []
    assert set(codes) <= {"ok", errors.FORBIDDEN, errors.BAD_ARGUMENT, errors.UNKNOWN_PATH}
    assert len(codes) == WRITES


def test_file_tools_follow_no_link_even_one_that_stays_inside(tmp_path):
    """A link is refused wherever it points: what it points to can change between two calls."""
    runtime = TeamRuntime(home=tmp_path / "home", policy=Policy())
    context = context_for(runtime, config={"configurable": {"thread_id": "t1"}})
    project = runtime.project_folder(context.config)
    (project / "real.txt").write_text("inside", encoding="utf-8")
    (project / "link.txt").symlink_to(project / "real.txt")
    with pytest.raises(ToolError) as caught:
        run(read_file, context, path="link.txt")
    assert caught.value.code == errors.FORBIDDEN
    read = run(read_file, context, path="real.txt")
    assert read.update["new"][0].content == "inside"  # NOTE: a Command: the read is recorded (file versions)


def test_write_file_refuses_the_git_folder(tmp_path):
    """Issue 31 failure 1: a member writing .git/config (a core.fsmonitor command) is refused."""
    runtime = TeamRuntime(home=tmp_path / "home", policy=Policy())
    context = context_for(runtime, config={"configurable": {"thread_id": "t1"}})
    for path in (".git/config", "sub/.git/hooks/pre-commit"):
        with pytest.raises(ToolError) as caught:
            run(write_file, context, path=path, content="[core]\n\tfsmonitor = touch /tmp/pwned\n")
        assert caught.value.code == errors.FORBIDDEN
    assert not (runtime.project_folder(context.config) / ".git").exists()


def _team(home: Path) -> Team:
    script = {LEADER: ["Done."]}
    return Team(model=ScriptedChatModel(script), home=home, policy=Policy())


def test_database_wal_files_and_exports_are_owner_only_under_umask_022(tmp_path, umask_022):
    """Failure 5: the database, its -wal/-shm files, the exports and the folders made for them."""
    from teamgraph.audit.export import export_thread

    home = tmp_path / "new" / "home"
    team = _team(home)
    graph = team.compile()
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"messages": [("user", "Hi")]}, config)
    db = Path(team.db_path)
    assert mode(db) == 0o600
    side = [Path(f"{db}{s}") for s in ("-wal", "-shm") if Path(f"{db}{s}").exists()]
    assert side, "WAL mode keeps its side files while connected"
    assert all(mode(p) == 0o600 for p in side), {p.name: oct(mode(p)) for p in side}
    assert mode(home) == 0o700 and mode(home.parent) == 0o700
    for fmt in ("md", "json", "sqlite"):
        out = export_thread(team, config, format=fmt)
        assert mode(out) == 0o600, (fmt, oct(mode(out)))
    assert mode(home / "exports") == 0o700


def test_the_log_and_its_folders_are_owner_only_under_umask_022(tmp_path, umask_022):
    home = tmp_path / "home"
    team = _team(home)
    team.compile().invoke({"messages": [("user", "Hi")]}, {"configurable": {"thread_id": "t1"}})
    logs = [p for p in home.rglob("*.log") if p.is_file()]
    assert logs
    for log in logs:
        assert mode(log) == 0o600 and mode(log.parent) == 0o700, (log, oct(mode(log.parent)))


def test_an_existing_world_readable_database_is_made_owner_only(tmp_path, umask_022):
    home = tmp_path / "home"
    home.mkdir()
    db = home / "teamgraph.sqlite"
    db.touch()
    db.chmod(0o644)
    _team(home).compile()
    assert mode(db) == 0o600


def test_export_of_a_thread_id_that_leaves_the_home_is_refused_and_writes_nothing(tmp_path):
    """Failure 8: ``teamgraph export ../../../x`` names the thread id and writes no file anywhere."""
    home = tmp_path / "a" / "b" / "home"
    team = _team(home)
    thread = "../../../x"
    team.compile().invoke({"messages": [("user", "Hi")]}, {"configurable": {"thread_id": thread}})
    before = sorted(p for p in tmp_path.rglob("*"))
    result = CliRunner().invoke(app, ["export", thread, "--home", str(home)])
    assert result.exit_code != 0
    assert thread in result.output
    assert sorted(p for p in tmp_path.rglob("*")) == before
