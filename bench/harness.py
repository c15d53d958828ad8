"""Measurement helpers shared by every workload.

- `fresh_sqlite_saver` / `db_bytes`: a SqliteSaver on a brand-new WAL file, and the
  file's size after folding the WAL back in.
- `timed_invoke`: run a graph once with `durability="sync"` and time it.
- `finish_row`: turn a workload's raw measurements into a result row
  (overhead per model call, bytes per message, peak RSS).
- `run_in_subprocess`: run one workload in a fresh `python -m bench.worker` process,
  so that its peak RSS belongs to that workload alone.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from bench.scripted import ModelMeter

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULT_MARKER = "BENCH_RESULT "


def fresh_sqlite_saver(path: str | Path) -> tuple[SqliteSaver, sqlite3.Connection]:
    """A SqliteSaver on a new, empty file in WAL mode (any old file is deleted)."""
    path = Path(path)
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn


def sqlite_saver(path: str | Path, params: dict) -> tuple[SqliteSaver, sqlite3.Connection, str]:
    """The saver a workload runs on: (saver, connection, label suffix).

    `params["saver"] == "teamgraph"`: the Team's own SQLite setup (what `Team(home=...)`
    opens: WAL, synchronous=NORMAL, busy timeout); otherwise LangGraph's `SqliteSaver` on a
    fresh file, as the baselines run.
    """
    if params.get("saver") == "teamgraph":
        from teamgraph.checkpoints import open_sqlite_saver

        saver = open_sqlite_saver(path)
        return saver, saver.conn, " (Team's saver)"
    return (*fresh_sqlite_saver(path), "")


def db_bytes(path: str | Path, conn: sqlite3.Connection | None = None) -> int:
    """Bytes on disk after `PRAGMA wal_checkpoint(TRUNCATE)`: main file + any WAL left."""
    path = Path(path)
    own = conn is None
    conn = conn or sqlite3.connect(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        if own:
            conn.close()
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return peak * scale / 1e6


def timed_invoke(graph: Any, inputs: Any, config: dict, meter: ModelMeter) -> tuple[Any, dict]:
    """Invoke `graph` once with `durability="sync"`; return (output, timing fields).

    The meter is reset first, so `model_calls` / `model_seconds` cover this run only.
    `cpu_seconds` is the process's CPU time during the run (all threads): less
    sensitive than wall time to other load on the machine.
    """
    meter.reset()
    cpu = time.process_time()
    start = time.perf_counter()
    output = graph.invoke(inputs, config, durability="sync")
    seconds = time.perf_counter() - start
    return output, {
        "seconds": seconds,
        "model_calls": meter.calls,
        "model_seconds": meter.seconds,
        "cpu_seconds": time.process_time() - cpu,
    }


def overhead_ms_per_call(seconds: float, model_seconds: float, model_calls: int) -> float | None:
    """(wall time - time inside the model) / model calls, in milliseconds."""
    if not model_calls:
        return None
    return (seconds - model_seconds) / model_calls * 1000.0


def finish_row(raw: dict, params: dict) -> dict:
    """Complete a workload's raw measurements into a result row.

    `raw` must hold `system`, `workload`, `model_calls`, `messages`, `seconds`,
    `model_seconds`; it may hold `db_bytes`, `peak_rss_mb` and any extra fields (kept
    as they are).
    """
    row = {"params": params, **raw}
    row.setdefault(
        "overhead_ms_per_call", overhead_ms_per_call(raw["seconds"], raw.get("model_seconds", 0.0), raw["model_calls"])
    )
    size, messages = raw.get("db_bytes"), raw.get("messages")
    row.setdefault("bytes_per_message", size / messages if size and messages else None)
    # NOTE: a workload may measure its peak itself (before post-run analysis).
    row.setdefault("peak_rss_mb", peak_rss_mb())
    return row


def run_in_subprocess(name: str, params: dict, timeout_s: float = 600.0) -> dict:
    """Run workload `name` with `params` in a fresh process and return its row.

    On failure (non-zero exit, timeout, no result line) the row carries an `error`.
    """
    cmd = [sys.executable, "-m", "bench.worker", name, json.dumps(params)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    base = {"workload_name": name, "params": params}
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {**base, "error": f"timed out after {timeout_s:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return {"workload_name": name, **json.loads(line[len(RESULT_MARKER) :])}
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
    return {**base, "error": f"exit code {proc.returncode}: " + "\n".join(tail)}
