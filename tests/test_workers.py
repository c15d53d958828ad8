"""The agents' steps run on daemon workers: a stopped run's process exits without waiting for them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from concurrent.futures import wait
from pathlib import Path

import pytest

from teamgraph.workers import DaemonExecutor

REPO = Path(__file__).resolve().parent.parent


def test_the_executor_runs_what_it_is_given_on_at_most_its_workers_daemon_threads():
    executor = DaemonExecutor(workers=2, name="t-workers")
    gate = threading.Event()
    blocked = [executor.submit(gate.wait, 30) for _ in range(3)]
    done = executor.submit(lambda x: x * 2, 21)
    gate.set()
    wait([*blocked, done], timeout=30)
    assert done.result() == 42 and all(f.result() for f in blocked)
    workers = [t for t in threading.enumerate() if t.name.startswith("t-workers")]
    assert 1 <= len(workers) <= 2 and all(t.daemon for t in workers)
    failed = executor.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result(timeout=30)


STOPPED_CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    sys.path.insert(0, "tests")
    from scripting import act, call, quiet
    from teamgraph import Policy, ScriptedChatModel, Team

    started = threading.Event()

    def never_answers(messages):
        started.set()
        time.sleep(600)
        return "too late"

    def interrupt_once_the_call_is_in_flight():
        started.wait(60)
        os.kill(os.getpid(), signal.SIGINT)

    script = {
        "Team Leader": [act(call("create_sub_agent", role_id="researcher", task="Dig.")), *quiet()],
        "Researcher_1": [never_answers],
    }
    team = Team(model=ScriptedChatModel(script), home=sys.argv[1], policy=Policy(scheduling="completions"))
    threading.Thread(target=interrupt_once_the_call_is_in_flight, daemon=True).start()
    try:
        team.compile().invoke({"messages": [("user", "Go.")]}, {"configurable": {"thread_id": "t"}})
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
    """
)


@pytest.mark.slow
def test_a_process_whose_run_was_interrupted_exits_with_a_model_call_in_flight(tmp_path: Path):
    # NOTE: the call in flight sleeps 600 s: a process that waited for it times out here.
    out = subprocess.run(
        [sys.executable, "-c", STOPPED_CHILD, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "INTERRUPTED" in out.stdout, out.stderr[-2000:]
    assert out.returncode == 0, out.stderr[-2000:]


def test_idle_workers_end_so_a_dropped_team_leaves_no_thread():
    """Issue 31 (failure 12): each dropped Team left its pool's threads running."""
    import threading as _threading
    import time as _time

    from teamgraph.workers import DaemonExecutor

    executor = DaemonExecutor(workers=3, name="teamgraph-linger-test", linger=0.2)
    futures = [executor.submit(_time.sleep, 0.05) for _ in range(3)]
    for future in futures:
        future.result(timeout=5)
    deadline = _time.monotonic() + 10
    while _time.monotonic() < deadline and any(
        t.name.startswith("teamgraph-linger-test") for t in _threading.enumerate()
    ):
        _time.sleep(0.05)
    assert not [t.name for t in _threading.enumerate() if t.name.startswith("teamgraph-linger-test")]
    assert executor.submit(lambda: 7).result(timeout=5) == 7  # NOTE: a new thread starts for new work


def test_each_run_has_workers_of_its_own():
    """Issue 30 (capacity per run): two runs of a pool with one worker each make their calls at once."""
    import threading as _threading

    from teamgraph.calls import CallPool

    pool = CallPool(workers=1)
    both = _threading.Barrier(2, timeout=10)
    pool.start("run-a", "Team Leader", 1, lambda: [both.wait()])
    pool.start("run-b", "Team Leader", 1, lambda: [both.wait()])
    pool.wait("run-a", {"Team Leader": 1}, every=True, timeout=20)
    pool.wait("run-b", {"Team Leader": 1}, every=True, timeout=20)
    for run in ("run-a", "run-b"):
        future = pool.take(run, "Team Leader", 1)
        assert future is not None and future.exception() is None  # NOTE: a shared worker would break the barrier
