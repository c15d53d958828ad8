"""The log's writer threads and index: forks, a relative folder, an index retired under a writer,
the passes' lines flushed on the flusher thread, two runs on one day file, the interpreter's exit."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from audit_fixtures import spy_flushes, task_lines
from scripting import act, call, quiet

import teamgraph.audit.log as audit_log
import teamgraph.audit.writer as audit_writer
from teamgraph import ScriptedChatModel, Team
from teamgraph.audit.log import append_events
from teamgraph.audit.records import parse_line
from teamgraph.audit.thread_log import read_log

LEADER, MEMBER = "Team Leader", "Researcher_1"
CONFIG = {"configurable": {"thread_id": "t"}}
NOW = datetime(2030, 1, 2, 9, 0, 0)


def _hello(home: Path, thread: str) -> dict:
    team = Team(model=ScriptedChatModel({LEADER: ["Hello."]}), home=home)
    return team.compile().invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": thread}})


def test_a_forked_child_runs_a_team_after_its_parent_did(tmp_path: Path) -> None:
    _hello(tmp_path / "parent", "p")  # NOTE: the parent's writer thread and index exist now
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)  # NOTE: a hang dies of SIGALRM
        try:
            _hello(tmp_path / "child", "c")
            os._exit(0)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_a_forked_child_runs_its_parents_team_after_the_parent_ran_it(tmp_path: Path) -> None:
    """The step pool's workers are the parent's: a child gets workers of its own."""
    graph = Team(model=ScriptedChatModel({LEADER: ["Hello.", "Hello again."]}), home=tmp_path).compile()
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "p"}})
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)
        try:
            graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c"}})
            os._exit(0)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_a_relative_logs_folder_keeps_its_own_index_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y = tmp_path / "x", tmp_path / "y"
    x.mkdir(), y.mkdir()
    logs = Path("home/project/p/logs")  # NOTE: relative, as under the default home ".teamgraph"
    monkeypatch.chdir(x)
    append_events(logs, "p", "t", NOW, task_lines(3))
    monkeypatch.chdir(y)
    append_events(logs, "p", "t", NOW, task_lines(1))
    monkeypatch.chdir(x)
    append_events(logs, "p", "t", NOW, task_lines(1))
    assert [len(f.read_text().splitlines()) for f in (x / logs).glob("*.log")] == [4]
    assert [len(f.read_text().splitlines()) for f in (y / logs).glob("*.log")] == [1]


def test_an_index_retired_between_its_lookup_and_its_lock_is_opened_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another folder's writer retired this folder's index (too many open) just after this
    writer looked it up: the write opens it again instead of using a closed connection."""
    monkeypatch.setattr(audit_log, "OPEN_INDEXES", 1)
    audit_log._forget_open_indexes()
    f1, f2 = tmp_path / "f1", tmp_path / "f2"
    real, once = audit_log._open_index, []

    def interleaved(folder: Path):
        index = real(folder)
        if folder == f1 and not once:
            once.append(1)
            real(f2)  # NOTE: another writer thread runs here
        return index

    monkeypatch.setattr(audit_log, "_open_index", interleaved)
    assert append_events(f1, "p", "t", NOW, task_lines(1))
    assert once


def test_a_run_opens_its_log_index_as_it_starts_and_writes_lines_only_from_its_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NOTE: the index of a fresh home is opened on the writer thread as the run starts (while
    # LangGraph writes its first checkpoints), before the first pass asks for its lines.
    order: list[str] = []
    open_log, append = audit_log.open_log, audit_log.append_events

    def opening(folder: Path) -> list[str]:
        order.append("open")
        return open_log(folder)

    def appending(*args, **kwargs) -> list[str]:
        order.append("lines")
        return append(*args, **kwargs)

    monkeypatch.setattr(audit_log, "open_log", opening)
    monkeypatch.setattr(audit_log, "append_events", appending)
    team = Team(model=ScriptedChatModel({LEADER: ["Hello."]}), home=tmp_path)
    team.compile().invoke({"messages": [("user", "hi")]}, CONFIG)
    assert order[0] == "open" and order.count("open") == 1 and "lines" in order
    folder = audit_log.log_folder(team.runtime, CONFIG)
    assert folder is not None and (folder / audit_log.INDEX_FILE).exists()
    assert [e.kind for e in read_log(team, CONFIG)][:1] == ["task"]  # NOTE: the lines are the passes'

    opened = tmp_path / "other" / "logs"
    audit_log.open_log(opened)  # NOTE: opening alone writes no line
    assert (opened / audit_log.INDEX_FILE).exists() and not [p for p in opened.iterdir() if p.suffix == ".log"]


def test_a_router_pass_has_its_lines_before_they_are_flushed_and_they_are_flushed_on_the_flusher_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    write = audit_log.write_committed

    def writing(*args, **kwargs) -> list[str]:
        order.append(f"lines sync={kwargs.get('sync', True)}")
        return write(*args, **kwargs)

    monkeypatch.setattr(audit_writer, "write_committed", writing)
    flushed = spy_flushes(monkeypatch)
    team = Team(
        model=ScriptedChatModel({LEADER: [act(call("create_sub_agent", role_id="researcher")), "Done."]}), home=tmp_path
    )
    team.compile().invoke({"messages": [("user", "hi")]}, CONFIG)
    audit_writer.write_committed_soon(team.runtime, team.state(CONFIG), CONFIG).result()
    folder = audit_log.log_folder(team.runtime, CONFIG)
    assert folder is not None
    audit_writer._submit(folder, lambda: []).result()  # NOTE: the writer thread is idle: every flush is queued
    audit_writer._FLUSHER[0].submit(lambda: None).result()  # NOTE: and every flush ran
    assert order and set(order) == {"lines sync=False"}
    (day,) = folder.glob("*.log")
    assert flushed and {name.split("_")[0] for name, _ in flushed} == {"teamgraph-flush"}
    assert {path for _, path in flushed} == {str(day)}


def test_two_threads_of_one_project_log_at_the_same_moment_each_line_once_and_all_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs share the project's day file and index: their passes and flushes interleave."""
    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Survey.")), *quiet()],
        MEMBER: [act(call("sleep", seconds=0)), "Survey done."],
    }

    def run(home: Path, thread: str) -> None:
        config = {"configurable": {"thread_id": thread, "project_name": "shared"}}
        Team(model=ScriptedChatModel(script), home=home).compile().invoke({"messages": [("user", "Go")]}, config)

    def lines(home: Path) -> Counter:
        folder = home / "logs" / "shared"
        events = [parse_line(line) for path in folder.glob("*.log") for line in path.read_text().splitlines()]
        return Counter((e.sender, e.receiver, e.kind, e.content) for e in events)

    run(tmp_path / "one", "alone")
    flushed = spy_flushes(monkeypatch)
    home = tmp_path / "two"
    workers = [threading.Thread(target=run, args=(home, thread)) for thread in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    audit_writer._FLUSHER[0].submit(lambda: None).result()  # NOTE: every flush queued so far ran
    alone = lines(tmp_path / "one")
    assert lines(home) == alone + alone  # NOTE: each run's lines once: none lost, none doubled
    folder = (home / "logs" / "shared").absolute()
    (day,) = folder.glob("*.log")
    assert str(day) in {path for _, path in flushed} and not audit_log._UNSYNCED.get(folder)


def test_a_child_forked_while_a_thread_holds_the_unsynced_guard_can_still_log(tmp_path: Path) -> None:
    """A fork while the flusher (or a writer) is inside _UNSYNCED_GUARD: the child's copy stays locked."""
    logs = tmp_path / "logs"
    append_events(logs, "p", "t", NOW, task_lines(1))
    inside, leave = threading.Event(), threading.Event()

    def flusher_like() -> None:
        with audit_log._UNSYNCED_GUARD:  # NOTE: what sync_appended/_append hold for a moment
            inside.set()
            leave.wait()

    holder = threading.Thread(target=flusher_like)
    holder.start()
    inside.wait()
    pid = os.fork()
    if pid == 0:
        signal.alarm(5)  # NOTE: a hang dies of SIGALRM
        try:
            append_events(tmp_path / "child", "p", "c", NOW, task_lines(1))
            os._exit(0)
        except BaseException:
            os._exit(3)
    leave.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


@pytest.mark.slow
def test_a_write_that_ends_as_the_interpreter_exits_is_still_flushed(tmp_path: Path) -> None:
    """A pass's write still on the writer thread when the main thread ends (Ctrl-C, an error mid-pass)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import os, threading
        from datetime import datetime
        from pathlib import Path
        import teamgraph.audit.log as audit_log
        import teamgraph.audit.writer as audit_writer
        from teamgraph.audit.records import LogEvent
        real = os.fdatasync
        def spy(fd):
            real(fd)
            os.write(1, b"flushed\\n")
        audit_log.os.fdatasync = spy
        logs = Path({str(tmp_path / "logs")!r})
        def derive(cursor):
            return [LogEvent(time="2030-01-02 09:00:00", sender="a", receiver="b", kind="task", content="x")], cursor
        gate = threading.Event()
        def write():
            gate.wait()
            return audit_log.append_events(logs, "p", "t", datetime(2030, 1, 2), derive, sync=False)
        written = audit_writer._submit(logs, write)
        written.add_done_callback(lambda _: audit_writer.flush_soon(logs))  # NOTE: as write_committed_soon does
        threading.Timer(0.3, gate.set).start()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "exception calling callback" not in done.stderr, done.stderr
    assert done.stdout.count("flushed") == 1
