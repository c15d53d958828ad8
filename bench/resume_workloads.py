"""Section 5: a thread resumed in a fresh process (``teamgraph-storage``'s resume rows).

``measure_resume`` copies a finished run's SQLite file and, in fresh processes
(``python -m bench.resume_workloads resume '<json>'``), opens it as ``Team(home=...)``
does, reads the state and takes one more step; the fastest process is kept.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from bench.harness import REPO_ROOT, peak_rss_mb, sqlite_saver
from bench.scripted import ModelMeter
from bench.team_model import LEADER, RESUME_INPUT, TeamModel, delegation_leader, echo_member, thread_id
from bench.team_probe import build_team, message_count


def measure_resume(path: Path, rounds: int, snapshot_frequency: int | None, repeats: int) -> dict:
    """Run `repeats` fresh processes that resume the thread; the fastest one's timings."""
    runs = []
    for i in range(repeats):
        # NOTE: each resumed step is written to the file; start every repeat from the
        # same state by resuming a copy.
        copy = path.with_name(f"resume-{i}.sqlite")
        _copy_db(path, copy)
        args = {"path": str(copy), "rounds": rounds, "snapshot_frequency": snapshot_frequency}
        cmd = [sys.executable, "-m", "bench.resume_workloads", "resume", json.dumps(args)]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
        }
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
        wall = time.perf_counter() - start
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("RESUME ")), None)
        if proc.returncode or line is None:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
            raise RuntimeError(f"resume child failed ({proc.returncode}): {tail}")
        child = json.loads(line[len("RESUME ") :])
        runs.append(
            {
                **child,
                "process_ms": wall * 1000.0,
                "history_ms": child["get_state_ms"] + child["step_ms"],
                "history_cpu_ms": child["get_state_cpu_ms"] + child["step_cpu_ms"],
                "startup_ms": wall * 1000.0 - child["in_process_ms"],
            }
        )
        copy.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    # NOTE: timings are the fastest of the repeats (contention only ever adds time);
    # the median of the in-process time is kept too.
    keys = [k for k in runs[0] if isinstance(runs[0][k], (int, float))]
    fastest = min(runs, key=lambda r: r["in_process_ms"])
    out = {k: fastest[k] for k in keys}
    out["median_in_process_ms"] = statistics.median(r["in_process_ms"] for r in runs)
    out["repeats"] = repeats
    return out


def _copy_db(src: Path, dst: Path) -> None:
    """Copy a SQLite database with the backup API (consistent, WAL folded in)."""
    for stale in (dst, Path(f"{dst}-wal"), Path(f"{dst}-shm")):
        stale.unlink(missing_ok=True)
    source = sqlite3.connect(str(src))
    target = sqlite3.connect(str(dst))
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def resume_child(args: dict) -> dict:
    """In a fresh process: open the SQLite file, get_state, take one more step.

    Returns milliseconds for each phase; `in_process_ms` = open (connect, build and
    compile the team) + get_state + step. Interpreter start-up and imports are the
    rest of the parent's `process_ms`.
    """
    clock = _Clock()
    path = Path(args["path"])
    rounds = int(args["rounds"])
    meter = ModelMeter()
    model = TeamModel(policies={LEADER: delegation_leader(rounds), "*": echo_member()}, meter=meter)
    # NOTE: a resumed process opens what `Team(home=...)` opens, on the file the run wrote
    # (or, with `saver="sqlite"`, LangGraph's own SqliteSaver: rule 8's with/without).
    if args.get("saver") == "sqlite":
        conn = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(conn)
    else:
        saver, conn, _ = sqlite_saver(path, {"saver": "teamgraph"})
    team, graph = build_team(path.parent, model, saver, snapshot_frequency=args.get("snapshot_frequency"))
    config = {"configurable": {"thread_id": thread_id(rounds)}}
    clock.lap("open")
    state = graph.get_state(config)
    before = message_count(state.values)
    clock.lap("get_state")
    graph.invoke({"messages": [HumanMessage(RESUME_INPUT)]}, config, durability="sync")
    clock.lap("step")
    after = message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    if after != before + 2 or meter.calls != 1:
        raise RuntimeError(f"resume step: {before} -> {after} messages, {meter.calls} model calls")
    conn.close()
    out = clock.result()
    out["in_process_ms"] = out["open_ms"] + out["get_state_ms"] + out["step_ms"]
    out["in_process_cpu_ms"] = out["open_cpu_ms"] + out["get_state_cpu_ms"] + out["step_cpu_ms"]
    return {**out, "messages_before": before, "peak_rss_mb": peak_rss_mb()}


class _Clock:
    """Wall and CPU milliseconds per phase (CPU time is less sensitive to a busy machine)."""

    def __init__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        self._laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self._laps[f"{name}_ms"] = (wall - self._wall) * 1000.0
        self._laps[f"{name}_cpu_ms"] = (cpu - self._cpu) * 1000.0
        self._wall, self._cpu = wall, cpu

    def result(self) -> dict[str, float]:
        return dict(self._laps)


def main(argv: list[str]) -> int:
    """`python -m bench.resume_workloads resume '<json>'`: the resume child."""
    if len(argv) != 2 or argv[0] != "resume":
        print("usage: python -m bench.resume_workloads resume '<json args>'", file=sys.stderr)
        return 2
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    print("RESUME " + json.dumps(resume_child(json.loads(argv[1]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
