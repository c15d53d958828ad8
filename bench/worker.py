"""Child-process entry point: `python -m bench.worker <workload> '<json params>'`.

Runs one workload once in this (fresh) process, in a temporary directory, and prints
one line `BENCH_RESULT {json row}` for the parent to collect. Peak RSS is read at
the end, so it covers this workload alone.
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from pathlib import Path

from bench.harness import RESULT_MARKER, finish_row
from bench.registry import load_registry


def run(name: str, params: dict) -> dict:
    """Run workload `name` with `params` in a scratch directory and return its row."""
    workload = load_registry().workloads[name]
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as workdir:
        raw = workload.fn(params, Path(workdir))
    return finish_row(raw, params)


def main(argv: list[str]) -> int:
    """Parse `<workload> <json params>`, run it, print the result line."""
    if len(argv) != 2:
        print("usage: python -m bench.worker <workload> '<json params>'", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    row = run(argv[0], json.loads(argv[1]))
    print(RESULT_MARKER + json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
