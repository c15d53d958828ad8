"""The log when the disk fails: a failed write or flush, a file that cannot be opened, a tail lost
in a power cut, and a recovery that fails in turn. No line is lost, doubled or torn."""

from __future__ import annotations

import errno
import os
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

LEADER, MEMBER = "Team Leader", "Researcher_1"
CONFIG = {"configurable": {"thread_id": "t"}}
NOW = datetime(2030, 1, 2, 9, 0, 0)


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


def test_a_new_process_cuts_an_older_day_files_uncommitted_tail(tmp_path: Path) -> None:
    """A writer that crashed before its commit left lines in yesterday's file: the next
    process to open the index cuts them off, not only in the file it appends to."""
    logs = tmp_path / "logs"
    yesterday = datetime(2030, 1, 1, 23, 59, 0)
    append_events(logs, "p", "t", yesterday, task_lines(2))
    (old,) = logs.glob("*.log")
    with open(old, "a", encoding="utf-8") as handle:
        handle.write("an uncommitted line\n")
    audit_log._forget_open_indexes()  # NOTE: as in a new process
    append_events(logs, "p", "t", NOW, task_lines(1))
    assert len(old.read_text().splitlines()) == 2


def test_a_failed_flush_stops_the_folders_next_write_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    spy_flushes(monkeypatch, fail=OSError(5, "Input/output error"))
    append_events(logs, "p", "t", NOW, task_lines(2), sync=False)
    audit_log.sync_appended(logs)  # NOTE: on the writer thread it has no caller to tell
    (day,) = logs.glob("*.log")
    with pytest.raises(OSError, match="Input/output"):
        append_events(logs, "p", "t", NOW, task_lines(1))
    assert len(day.read_text().splitlines()) == 2
    append_events(logs, "p", "t", NOW, task_lines(1))  # NOTE: the disk flushes again: so do the writes
    assert len(day.read_text().splitlines()) == 3


def test_a_day_file_that_lost_its_tail_in_a_power_cut_says_so_once_and_goes_on(tmp_path: Path) -> None:
    """A power cut between a commit and its flush: the index records more than the disk kept."""
    logs = tmp_path / "logs"
    append_events(logs, "p", "t", NOW, task_lines(3), sync=False)
    (day,) = logs.glob("*.log")
    kept = day.read_text().splitlines()[:1]
    day.write_text(kept[0] + "\n")  # NOTE: what the disk kept of the unflushed lines
    audit_log._forget_open_indexes()  # NOTE: as in a new process after the cut
    append_events(logs, "p", "t", NOW, task_lines(1))
    append_events(logs, "p", "t", NOW, task_lines(1))
    events = [parse_line(line) for line in day.read_text().splitlines()]
    assert [(e.level, e.code) for e in events] == [
        ("INFO", ""),
        ("CRITICAL", "LOG_LOST"),
        ("INFO", ""),
        ("INFO", ""),
    ]
    audit_log._forget_open_indexes()
    append_events(logs, "p", "t", NOW, task_lines(1))  # NOTE: the index and the file agree again
    assert [parse_line(line).code for line in day.read_text().splitlines()].count("LOG_LOST") == 1


def test_an_inline_flush_that_fails_fails_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sync=True (the human gate, flush_log, a direct write_committed) promises the lines are on disk."""
    logs = tmp_path / "logs"
    monkeypatch.setattr(audit_log, "_SYNC_FAILED", {})

    def fdatasync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(audit_log.os, "fdatasync", fdatasync)
    with pytest.raises(OSError, match="Input/output"):
        append_events(logs, "p", "t", NOW, task_lines(2), sync=True)


def test_a_flush_that_cannot_open_its_file_is_raised_by_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMFILE/EACCES/EIO at os.open in sync_appended: not kept in _SYNC_FAILED, lost in the flusher's future."""
    logs = tmp_path / "logs"
    monkeypatch.setattr(audit_log, "_SYNC_FAILED", {})
    append_events(logs, "p", "t", NOW, task_lines(2), sync=False)
    real_open = os.open

    def opening(path, flags, *args):
        if str(path).endswith(".log") and flags == os.O_RDONLY:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, *args)

    monkeypatch.setattr(audit_log.os, "open", opening)
    flushed = audit_writer.flush_soon(logs.absolute())
    assert flushed is not None
    flushed.exception(timeout=10)  # NOTE: nobody ever looks at this future in the router's flow
    monkeypatch.setattr(audit_log.os, "open", real_open)
    assert audit_log._UNSYNCED.get(logs.absolute())  # NOTE: kept: the folder's next flush tries again
    with pytest.raises(OSError, match="Too many open files"):  # NOTE: as a failed fdatasync would be
        append_events(logs, "p", "t", NOW, task_lines(1), sync=False)


def test_a_recovery_rolled_back_leaves_no_torn_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A power cut lost the last line; the new process's first write fails (disk full) and rolls back."""
    logs = tmp_path / "logs"
    append_events(logs, "p", "t", NOW, task_lines(3), sync=False)
    (day,) = logs.glob("*.log")
    kept = day.read_bytes()
    day.write_bytes(kept[: kept[:-1].rfind(b"\n") + 1])  # NOTE: what the disk kept: the last line is lost
    audit_log._forget_open_indexes()  # NOTE: a new process
    append = audit_log._append

    def disk_full(path, lines, *, committed):
        if not any("LOG_LOST" in line for line in lines):
            raise OSError(errno.ENOSPC, "No space left on device")
        return append(path, lines, committed=committed)

    monkeypatch.setattr(audit_log, "_append", disk_full)
    with pytest.raises(OSError, match="No space"):
        append_events(logs, "p", "t", NOW, task_lines(1))
    monkeypatch.setattr(audit_log, "_append", append)  # NOTE: space again
    append_events(logs, "p", "t", NOW, task_lines(1))
    text = day.read_text()
    codes = [parse_line(line).code for line in text.splitlines()]
    assert codes.count("LOG_LOST") == 1, "the power cut's report is gone"
    assert all(line.count("[20") == 1 for line in text.splitlines()), "a torn line"
