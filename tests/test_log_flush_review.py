"""Review 8: the log's deferred flush under a fork, a failed flush, a failed recovery and interpreter exit."""

from __future__ import annotations

import errno
import os
import signal
import threading
from datetime import datetime
from pathlib import Path

import pytest

import teamgraph.audit.log as audit_log
import teamgraph.audit.writer as audit_writer
from teamgraph.audit.log import append_events
from teamgraph.audit.records import LogEvent, parse_line

NOW = datetime(2030, 1, 2, 9, 0, 0)


def _lines(n: int):
    def derive(cursor):
        start = cursor.get("n", 0) if isinstance(cursor, dict) else 0
        events = [
            LogEvent(time="2030-01-02 09:00:00", sender="a", receiver="b", kind="task", content=f"line {start + i}")
            for i in range(n)
        ]
        return events, {**cursor, "n": start + n}

    return derive


def test_a_child_forked_while_a_thread_holds_the_unsynced_guard_can_still_log(tmp_path: Path) -> None:
    """A fork while the flusher (or a writer) is inside _UNSYNCED_GUARD: the child's copy stays locked."""
    logs = tmp_path / "logs"
    append_events(logs, "p", "t", NOW, _lines(1))
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
            append_events(tmp_path / "child", "p", "c", NOW, _lines(1))
            os._exit(0)
        except BaseException:
            os._exit(3)
    leave.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_an_inline_flush_that_fails_fails_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sync=True (the human gate, flush_log, a direct write_committed) promises the lines are on disk."""
    logs = tmp_path / "logs"
    monkeypatch.setattr(audit_log, "_SYNC_FAILED", {})

    def fdatasync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(audit_log.os, "fdatasync", fdatasync)
    with pytest.raises(OSError, match="Input/output"):
        append_events(logs, "p", "t", NOW, _lines(2), sync=True)


def test_a_flush_that_cannot_open_its_file_is_raised_by_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMFILE/EACCES/EIO at os.open in sync_appended: not kept in _SYNC_FAILED, lost in the flusher's future."""
    logs = tmp_path / "logs"
    monkeypatch.setattr(audit_log, "_SYNC_FAILED", {})
    append_events(logs, "p", "t", NOW, _lines(2), sync=False)
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
        append_events(logs, "p", "t", NOW, _lines(1), sync=False)


def test_a_recovery_rolled_back_leaves_no_torn_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A power cut lost the last line; the new process's first write fails (disk full) and rolls back."""
    logs = tmp_path / "logs"
    append_events(logs, "p", "t", NOW, _lines(3), sync=False)
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
        append_events(logs, "p", "t", NOW, _lines(1))
    monkeypatch.setattr(audit_log, "_append", append)  # NOTE: space again
    append_events(logs, "p", "t", NOW, _lines(1))
    text = day.read_text()
    print(text)
    codes = [parse_line(line).code for line in text.splitlines()]
    assert codes.count("LOG_LOST") == 1, "the power cut's report is gone"
    assert all(line.count("[20") == 1 for line in text.splitlines()), "a torn line"


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
