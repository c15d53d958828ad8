"""Shared scripts and helpers for the audit tests (log, tokens, stats, export)."""

from __future__ import annotations

from pathlib import Path

from scripting import act, call, on_message

from teamgraph import Policy, ScriptedChatModel, Team

LEADER = "Team Leader"
SECRETS = ("sk-live1234567890abcdef", "hunter2", "abc123token", "AKIAABCDEFGHIJKLMNOP")

LEADER_TURN = on_message(
    {
        "id: ask_1": act(call("answer_sub_agent_question", question_id="ask_1", answer="Use blue.")),
        "Result from UI Operator_1": "Login page ready.",
    }
)
LOGIN_SCRIPT = {
    "Team Leader": [
        act(call("create_sub_agent", role_id="ui-operator", task=f"Design web/login.html. Key {SECRETS[0]}")),
        *[LEADER_TURN] * 8,
    ],
    "UI Operator_1": [
        act(call("write_file", path="web/login.html", content=f"<form>password={SECRETS[1]}</form>")),
        act(call("read_file", path="missing.txt")),
        act(call("ask_master", question=f"Which colour? token={SECRETS[2]}", api_key=SECRETS[3])),
        "Login page done.",
    ],
}
"""A leader that creates a member, which writes a file, fails a read, asks a question, reports."""

CONFIG = {"configurable": {"thread_id": "login"}}


def login_team(
    home: Path, *, clock=None, policy: Policy | None = None, script: dict | None = None, project: str | None = None
) -> Team:
    """A team over ``home`` playing ``LOGIN_SCRIPT`` (or ``script``)."""
    return Team(model=ScriptedChatModel(script or LOGIN_SCRIPT), home=home, clock=clock, policy=policy, project=project)


def log_files(home: Path, project: str = "login") -> list[Path]:
    """The project's day files, oldest first."""
    return sorted((home / "logs" / project).glob("*_collaboration.log"))


def log_lines(home: Path, project: str = "login") -> list[str]:
    """Every line of the project's day files, oldest file first."""
    return [line for path in log_files(home, project) for line in path.read_text(encoding="utf-8").splitlines()]


def task_lines(n: int):
    """A ``derive`` for ``append_events``: ``n`` task lines numbered on from the cursor's count."""
    from teamgraph.audit.records import LogEvent

    def derive(cursor):
        start = cursor.get("n", 0) if isinstance(cursor, dict) else 0
        events = [
            LogEvent(
                time="2030-01-02 09:00:00", sender="user", receiver="Team Leader", kind="task", content=f"task {i}"
            )
            for i in range(start, start + n)
        ]
        return events, {**cursor, "n": start + n}

    return derive


def spy_flushes(monkeypatch, *, fail: OSError | None = None) -> list[tuple[str, str]]:
    """Spy on the log's fdatasync: (thread name, file) per flush; with ``fail``, the first flush raises it."""
    import os
    import threading

    import teamgraph.audit.log as audit_log

    flushed: list[tuple[str, str]] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        flushed.append((threading.current_thread().name, os.readlink(f"/proc/self/fd/{fd}")))
        if fail is not None and len(flushed) == 1:
            raise fail
        real(fd)

    monkeypatch.setattr(audit_log.os, "fdatasync", fdatasync)
    return flushed
