"""Issue 30's benchmark row: runs per minute past one machine, beside the ideal.

- ``cluster-runs-per-minute``: N concurrent threads (20, 60), one run each, of a team of a
  leader and two researchers (``tests/cluster_fixtures.TeamJob``: 8 model calls a run, 4
  on its critical path) against the local OpenAI-protocol server with 2 s of latency,
  served three ways:

  - ``cluster``: two replicas of ``langgraph-runtime-pg`` (``langhost serve``) on one
    PostgreSQL and one Redis, runs posted round-robin through ``langgraph_sdk``;
  - ``replica``: one such replica;
  - ``process``: one Python process, ``Team(...).compile().invoke`` on N threads of a pool,
    SQLite in the work folder.

  Runs per minute = N x 60 s / the time until every run has finished; the ideal is
  N x 60 s / one run's time alone (measured first, the same way). On the server a run
  has finished when its thread's last checkpoint is written (the server's ``created_at``):
  the client's joins, one after the other, return up to 14 s later on two replicas
  (``join_lag_s``), which would measure the client, not the cluster. Each replica takes up
  to 60 runs at once (``--n-jobs-per-worker``), so the server's job slots do not cap it.

  Where the time goes, over the N concurrent runs: ``cpu_busy``, the machine's CPUs busy
  (every process, ours and others', from ``/proc/stat``), and ``serving_cpu_s``, the CPU
  seconds of what serves the runs (the replicas' process groups, or this process).

Needs PostgreSQL (``initdb``/``pg_ctl``) and Debian's ``redis-server``; the server's pinned
environment is built in ``.venv-cluster/`` on first use. Not part of ``--quick``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.registry import Workload

REPO = Path(__file__).resolve().parents[1]
LATENCY_S = 2.0
JOBS_PER_REPLICA = 60
GRAPH_ID = "teamgraph"


def _tests_path() -> None:
    # NOTE: the cluster and the model server are the tests' own (tests/cluster_fixtures.py).
    folder = str(REPO / "tests")
    if folder not in sys.path:
        sys.path.insert(0, folder)


def _ask(tag: str) -> str:
    return f"Please run [job {tag}]."


Finished = tuple[float, float] | None
"""When the last run finished (epoch seconds) and when the client knew; None: when the call returned."""


def _on_server(urls: list[str]) -> Callable[[list[str]], Finished]:
    """Run one run per tag through the API (round-robin over ``urls``), wait for all, say when they finished."""
    from langgraph_sdk import get_sync_client

    clients = [get_sync_client(url=url, timeout=600) for url in urls]

    def run(tags: list[str]) -> Finished:
        posted = []
        for n, tag in enumerate(tags):
            client = clients[n % len(clients)]
            thread = client.threads.create()["thread_id"]
            body = {"messages": [{"role": "user", "content": _ask(tag)}]}
            posted.append((client, thread, client.runs.create(thread, GRAPH_ID, input=body)["run_id"]))
        for client, thread, run_id in posted:
            client.runs.join(thread, run_id)
            status = client.runs.get(thread, run_id)["status"]
            if status != "success":
                raise RuntimeError(f"run {run_id} of thread {thread} ended {status}")
        known = time.time()
        last = max(client.threads.get_state(thread)["created_at"] for client, thread, _ in posted)
        return datetime.fromisoformat(last).timestamp(), known

    return run


def _in_process(model_url: str, workdir: Path) -> Callable[[list[str]], Finished]:
    """Run one run per tag in this process, all at once."""
    os.environ.update({"OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "test-key"})
    from teamgraph import Team

    graph = Team(model="openai:gpt-test", home=workdir / "home").compile()

    def run(tags: list[str]) -> Finished:
        def one(tag: str) -> Any:
            return graph.invoke({"messages": [("user", _ask(tag))]}, {"configurable": {"thread_id": tag}})

        with ThreadPoolExecutor(len(tags)) as pool:
            list(pool.map(one, tags))
        return None

    return run


def _machine_cpu() -> tuple[float, float]:
    """The machine's (busy, total) CPU time so far, in clock ticks (``/proc/stat``)."""
    ticks = [float(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # NOTE: idle and iowait
    return sum(ticks) - idle, sum(ticks)


def _group_cpu_s(groups: set[int]) -> float:
    """CPU seconds (user + system) of the live processes in the process groups ``groups``."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # NOTE: gone meanwhile
        if int(fields[2]) in groups:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _serving_cpu_s(groups: set[int] | None) -> float:
    """CPU seconds of what serves the runs: the replicas' groups, or this process (None)."""
    if groups is None:
        times = os.times()
        return times.user + times.system
    return _group_cpu_s(groups)


def _timed(run: Callable[[list[str]], Finished], tags: list[str]) -> tuple[float, float]:
    """Seconds until ``run``'s runs finished, and until the client knew."""
    start = time.time()
    finished = run(tags)
    known = time.time()
    if finished is None:
        return known - start, known - start
    return finished[0] - start, finished[1] - start


def _measure(run: Callable[[list[str]], Finished], threads: int, groups: set[int] | None = None) -> dict[str, float]:
    """One run alone, then ``threads`` runs at once: the seconds of each, and the CPU the second took."""
    alone, _ = _timed(run, ["alone"])
    machine, served = _machine_cpu(), _serving_cpu_s(groups)
    seconds, known = _timed(run, [f"t{n:03d}" for n in range(threads)])
    (busy, total), (busy_0, total_0) = _machine_cpu(), machine
    return {
        "alone": alone,
        "seconds": seconds,
        "join_lag_s": round(known - seconds, 1),
        "cpu_busy": round((busy - busy_0) / max(total - total_0, 1.0), 3),
        "serving_cpu_s": round(_serving_cpu_s(groups) - served, 1),
    }


def runs_per_minute_workload(params: dict, workdir: Path) -> dict:
    """Runs per minute at ``threads`` concurrent threads, served as ``mode`` says (see the module doc)."""
    _tests_path()
    from cluster_fixtures import TeamJob, start_cluster
    from openai_server import ScriptedOpenAIServer
    from pg_fixtures import _start_cluster

    threads, mode = int(params["threads"]), str(params["mode"])
    if mode == "process":
        job = TeamJob(latency=LATENCY_S)
        with ScriptedOpenAIServer(job) as server:
            measured = _measure(_in_process(server.base_url, workdir), threads)
    else:
        # NOTE: a folder of its own under /tmp: as root, PostgreSQL runs as `postgres`, which must reach it.
        pg_folder = Path(tempfile.mkdtemp(prefix="teamgraph-pg-"))
        url, stop = _start_cluster(pg_folder)
        try:
            replicas = 2 if mode == "cluster" else 1
            cluster_run = start_cluster(url, replicas=replicas, latency=LATENCY_S, jobs_per_worker=JOBS_PER_REPLICA)
            cluster = next(cluster_run)
            try:
                job = cluster.job
                groups = {r.process.pid for r in cluster.replicas}  # NOTE: each replica leads its own group
                measured = _measure(_on_server([r.url for r in cluster.replicas]), threads, groups)
            finally:
                cluster_run.close()
        finally:
            subprocess.run(stop, capture_output=True, timeout=60, check=False)
            shutil.rmtree(pg_folder, ignore_errors=True)
    calls = sum(job.calls.values())
    alone, seconds = measured["alone"], measured["seconds"]
    return {
        "system": f"teamgraph ({mode})",
        "workload": f"runs per minute, {threads} concurrent threads",
        "threads": threads,
        "mode": mode,
        "model_calls": calls,
        "messages": 2 * (threads + 1),
        "seconds": seconds,
        "model_seconds": LATENCY_S * calls,
        "overhead_ms_per_call": None,  # NOTE: the runs' calls overlap: time per call says nothing here
        "one_run_s": round(alone, 2),
        "runs_per_minute": round(threads * 60 / seconds, 1),
        "ideal_runs_per_minute": round(threads * 60 / alone, 1),
        "join_lag_s": measured["join_lag_s"],
        "cpu_busy": measured["cpu_busy"],
        "serving_cpu_s": measured["serving_cpu_s"],
        "cpu_s_per_run": round(measured["serving_cpu_s"] / threads, 2),
    }


WORKLOADS: dict[str, Workload] = {
    "cluster-runs-per-minute": Workload(
        runs_per_minute_workload,
        full=[{"threads": n, "mode": mode} for n in (20, 60) for mode in ("cluster", "replica", "process")],
        quick=[],
        timeout_s=900.0,
        description=runs_per_minute_workload.__doc__,
    ),
}
