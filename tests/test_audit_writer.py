"""The log's writer threads and index: a fork, a failed write or flush, a relative folder, a day file's tail."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from scripting import act, call, quiet

import teamgraph.audit.log as audit_log
import teamgraph.audit.writer as audit_writer
from teamgraph import ScriptedChatModel, Team
from teamgraph.audit.log import append_events
from teamgraph.audit.records import LogEvent, parse_line
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


def test_a_failed_log_write_leaves_the_finished_step_to_the_retried_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass waits for its log before it takes any step: a write that fails loses no result."""
    calls: list[int] = []

    def member_turn(messages):
        calls.append(1)
        return "Survey done."

    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Survey.")), *quiet()],
        MEMBER: [member_turn, member_turn],
    }
    graph = Team(model=ScriptedChatModel(script), home=tmp_path).compile()
    original, failed = audit_writer.write_committed, []

    def flaky(runtime, state, config=None, **kwargs):
        if MEMBER in state.get("team", {}).get("in_flight", {}) and not failed:
            failed.append(1)
            raise OSError("disk full")
        return original(runtime, state, config, **kwargs)

    monkeypatch.setattr(audit_writer, "write_committed", flaky)
    with pytest.raises(OSError):
        graph.invoke({"messages": [("user", "Go")]}, CONFIG)
    graph.invoke(None, CONFIG)  # NOTE: the disk has room again: the run goes on
    assert failed and len(calls) == 1


def _lines(n: int):
    def derive(cursor):
        events = [
            LogEvent(time="2030-01-02 09:00:00", sender="user", receiver=LEADER, kind="task", content=f"task {i}")
            for i in range(n)
        ]
        return events, cursor

    return derive


def test_a_relative_logs_folder_keeps_its_own_index_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y = tmp_path / "x", tmp_path / "y"
    x.mkdir(), y.mkdir()
    logs = Path("home/project/p/logs")  # NOTE: relative, as under the default home ".teamgraph"
    monkeypatch.chdir(x)
    append_events(logs, "p", "t", NOW, _lines(3))
    monkeypatch.chdir(y)
    append_events(logs, "p", "t", NOW, _lines(1))
    monkeypatch.chdir(x)
    append_events(logs, "p", "t", NOW, _lines(1))
    assert [len(f.read_text().splitlines()) for f in (x / logs).glob("*.log")] == [4]
    assert [len(f.read_text().splitlines()) for f in (y / logs).glob("*.log")] == [1]


def test_a_new_process_cuts_an_older_day_files_uncommitted_tail(tmp_path: Path) -> None:
    """A writer that crashed before its commit left lines in yesterday's file: the next
    process to open the index cuts them off, not only in the file it appends to."""
    logs = tmp_path / "logs"
    yesterday = datetime(2030, 1, 1, 23, 59, 0)
    append_events(logs, "p", "t", yesterday, _lines(2))
    (old,) = logs.glob("*.log")
    with open(old, "a", encoding="utf-8") as handle:
        handle.write("an uncommitted line\n")
    audit_log._forget_open_indexes()  # NOTE: as in a new process
    append_events(logs, "p", "t", NOW, _lines(1))
    assert len(old.read_text().splitlines()) == 2


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
    assert append_events(f1, "p", "t", NOW, _lines(1))
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


def _flushes(monkeypatch: pytest.MonkeyPatch, *, fail: OSError | None = None) -> list[tuple[str, str]]:
    """Spy on fdatasync: (thread name, file) per flush; with ``fail``, the first flush raises it."""
    flushed: list[tuple[str, str]] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        flushed.append((threading.current_thread().name, os.readlink(f"/proc/self/fd/{fd}")))
        if fail is not None and len(flushed) == 1:
            raise fail
        real(fd)

    monkeypatch.setattr(audit_log.os, "fdatasync", fdatasync)
    return flushed


def test_a_router_pass_has_its_lines_before_they_are_flushed_and_they_are_flushed_on_the_flusher_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    write = audit_log.write_committed

    def writing(*args, **kwargs) -> list[str]:
        order.append(f"lines sync={kwargs.get('sync', True)}")
        return write(*args, **kwargs)

    monkeypatch.setattr(audit_writer, "write_committed", writing)
    flushed = _flushes(monkeypatch)
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


def test_a_failed_flush_stops_the_folders_next_write_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    _flushes(monkeypatch, fail=OSError(5, "Input/output error"))
    append_events(logs, "p", "t", NOW, _lines(2), sync=False)
    audit_log.sync_appended(logs)  # NOTE: on the writer thread it has no caller to tell
    (day,) = logs.glob("*.log")
    with pytest.raises(OSError, match="Input/output"):
        append_events(logs, "p", "t", NOW, _lines(1))
    assert len(day.read_text().splitlines()) == 2
    append_events(logs, "p", "t", NOW, _lines(1))  # NOTE: the disk flushes again: so do the writes
    assert len(day.read_text().splitlines()) == 3


def test_a_day_file_that_lost_its_tail_in_a_power_cut_says_so_once_and_goes_on(tmp_path: Path) -> None:
    """A power cut between a commit and its flush: the index records more than the disk kept."""
    logs = tmp_path / "logs"
    append_events(logs, "p", "t", NOW, _lines(3), sync=False)
    (day,) = logs.glob("*.log")
    kept = day.read_text().splitlines()[:1]
    day.write_text(kept[0] + "\n")  # NOTE: what the disk kept of the unflushed lines
    audit_log._forget_open_indexes()  # NOTE: as in a new process after the cut
    append_events(logs, "p", "t", NOW, _lines(1))
    append_events(logs, "p", "t", NOW, _lines(1))
    events = [parse_line(line) for line in day.read_text().splitlines()]
    assert [(e.level, e.code) for e in events] == [
        ("INFO", ""),
        ("CRITICAL", "LOG_LOST"),
        ("INFO", ""),
        ("INFO", ""),
    ]
    audit_log._forget_open_indexes()
    append_events(logs, "p", "t", NOW, _lines(1))  # NOTE: the index and the file agree again
    assert [parse_line(line).code for line in day.read_text().splitlines()].count("LOG_LOST") == 1


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
    flushed = _flushes(monkeypatch)
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
