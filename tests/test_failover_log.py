"""After a failover the collaboration log goes on: a run killed in process A, resumed by process B.

Both processes use one PostgreSQL database and one (shared) home folder, as two replicas
on a shared volume would. The log must hold each line of an uninterrupted run once, in
its order: process B continues from the cursor A committed in the log's index (in the
shared home), and never writes the thread's log again from the start.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from audit_fixtures import CONFIG, LOGIN_SCRIPT, log_lines, login_team
from conftest import FakeClock
from pg_fixtures import postgres_server, postgres_url  # noqa: F401

from teamgraph import ScriptedChatModel, Team
from teamgraph.audit import LINE_RE, flush_log

TESTS = Path(__file__).resolve().parent
PROCESS_A = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, sys.argv[4])
    from audit_fixtures import CONFIG, LOGIN_SCRIPT
    from conftest import FakeClock
    from teamgraph import Team
    from teamgraph.models.scripted import ScriptedChatModel

    home, db, point = sys.argv[1], sys.argv[2], int(sys.argv[3])
    calls = [0]
    original = ScriptedChatModel._generate

    def _generate(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == point:
            os.kill(os.getpid(), signal.SIGKILL)  # NOTE: the replica dies mid-run
        return original(self, *args, **kwargs)

    ScriptedChatModel._generate = _generate
    team = Team(model=ScriptedChatModel(LOGIN_SCRIPT), home=home, clock=FakeClock(), checkpointer=db)
    team.compile().invoke({"messages": [("user", "Build a login page.")]}, CONFIG)
    sys.exit(3)  # NOTE: the kill point was never reached
    """
)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> list[str]:
    """The log lines of the same run, never interrupted (SQLite, one process)."""
    team = login_team(tmp_path_factory.mktemp("reference") / "home", clock=FakeClock())
    team.compile().invoke({"messages": [("user", "Build a login page.")]}, CONFIG)
    flush_log(team, CONFIG)
    return log_lines(team.home)


@pytest.mark.parametrize("point", [2, 4, 6])
def test_a_run_moved_to_another_process_continues_its_log(tmp_path, postgres_url, uninterrupted, point):  # noqa: F811
    home = tmp_path / "shared-home"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    killed = subprocess.run(
        [sys.executable, "-c", PROCESS_A, str(home), postgres_url, str(point), str(TESTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    written_by_a = log_lines(home)
    assert 0 < len(written_by_a) < len(uninterrupted)

    team = Team(model=ScriptedChatModel(LOGIN_SCRIPT), home=home, clock=FakeClock(), checkpointer=postgres_url)
    team.compile().invoke(None, CONFIG)  # NOTE: process B resumes the thread from its last checkpoint
    flush_log(team, CONFIG)
    lines = log_lines(home)
    assert lines[: len(written_by_a)] == written_by_a
    assert lines == uninterrupted
    assert all(LINE_RE.match(line) for line in lines)
