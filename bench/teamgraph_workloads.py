"""teamgraph's own workloads (sections 1-6 of the benchmarks issue).

TODO(teamgraph bench owner): implement teamgraph's workloads here and register them
in `WORKLOADS` below. They are then picked up by `python -m bench` and
`python -m bench --only <name>`.

A workload is `fn(params: dict, workdir: pathlib.Path) -> dict`, run once per
parameter set in a fresh child process (see `bench/registry.py`). Build the team
with `bench.scripted.ScriptedChatModel` models sharing one `ModelMeter`, checkpoint
with `bench.harness.fresh_sqlite_saver(workdir / "x.sqlite")`, run it with
`bench.harness.timed_invoke(...)` (durability="sync"), and return at least:

    {"system": "teamgraph", "workload": "delegation rounds", "rounds": R,
     "model_calls": ..., "model_seconds": ..., "seconds": ..., "messages": ...,
     "db_bytes": bench.harness.db_bytes(path, conn)}

Example registration:

    WORKLOADS = {
        "teamgraph": Workload(delegation_workload,
                              full=[{"rounds": r} for r in (10, 50, 100)],
                              quick=[{"rounds": 10}]),
    }
"""

from __future__ import annotations

from bench.registry import Workload

WORKLOADS: dict[str, Workload] = {}
