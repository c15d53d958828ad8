"""Profile one workload run with cProfile: `python -m bench.profile NAME '<json params>'`.

Runs the workload in this process (not in a child) with cProfile switched on only
around the measured `graph.invoke` (`bench.harness.timed_invoke`), so team building
and post-run analysis stay out of the profile. Prints the top functions by
cumulative and by own time, and writes the raw stats for snakeviz / pstats.

Options: `--sort cumulative|tottime` (print only one), `--limit N` (rows, default 40),
`--out PATH` (default /tmp/bench-NAME.prof). Only the main thread is profiled:
LangGraph writes checkpoints on a background thread, which shows up here as time
waiting on a lock (`_thread.lock.acquire`); the workloads' `breakdown_ms_per_call`
times those writes directly.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import warnings
from pathlib import Path

import bench.harness
from bench.registry import load_registry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("name", help="workload name (see python -m bench --list)")
    parser.add_argument("params", help="JSON parameters, e.g. '{\"rounds\": 100}'")
    parser.add_argument("--sort", choices=("cumulative", "tottime"), default=None)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)

    workload = load_registry().workloads[args.name]
    profiler = cProfile.Profile()
    original = bench.harness.timed_invoke

    def profiled_invoke(*a, **k):
        profiler.enable()
        try:
            return original(*a, **k)
        finally:
            profiler.disable()

    # Workload modules import `timed_invoke` by name: patch it where it is used.
    patched = [
        m for m in list(sys.modules.values()) if getattr(m, "timed_invoke", None) is original and m is not bench.harness
    ]
    for module in patched:
        module.timed_invoke = profiled_invoke
    try:
        with tempfile.TemporaryDirectory(prefix=f"bench-profile-{args.name}-") as workdir:
            row = workload.fn(json.loads(args.params), Path(workdir))
    finally:
        for module in patched:
            module.timed_invoke = original
    out = args.out or Path(tempfile.gettempdir()) / f"bench-{args.name}.prof"
    profiler.dump_stats(str(out))
    summary = {
        k: row.get(k)
        for k in ("seconds", "model_calls", "model_seconds", "messages", "db_bytes", "breakdown_ms_per_call")
        if k in row
    }
    print(json.dumps(summary, indent=1))
    stats = pstats.Stats(profiler)
    for key in [args.sort] if args.sort else ["cumulative", "tottime"]:
        stats.sort_stats(key).print_stats(args.limit)
    print(f"raw stats: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
