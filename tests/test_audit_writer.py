"""The log's writer threads and index: a fork, a failed write, a relative folder, an old day file's tail."""

from __future__ import annotations

import os
import signal
from datetime import datetime
from pathlib import Path

import pytest
from scripting import act, call, quiet

import teamgraph.audit.log as audit_log
import teamgraph.audit.writer as audit_writer
from teamgraph import ScriptedChatModel, Team
from teamgraph.audit.log import append_events
from teamgraph.audit.records import LogEvent

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

    def flaky(runtime, state, config=None):
        if MEMBER in state.get("team", {}).get("in_flight", {}) and not failed:
            failed.append(1)
            raise OSError("disk full")
        return original(runtime, state, config)

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
