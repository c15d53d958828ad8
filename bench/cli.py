"""`python -m bench [--quick] [--only NAME ...] [--out PATH] [--list]`.

Runs every selected workload once per parameter set, each in a fresh child process,
prints a table (and, for a full run, the issue's targets with PASS / MISS) and writes
the rows, the targets and machine info to a JSON file.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from bench import targets, targets_issue10, targets_issue29
from bench.harness import run_in_subprocess
from bench.registry import Registry, Workload, load_registry

DEFAULT_OUT = Path(__file__).resolve().parent / "results.json"
QUICK_OUT = DEFAULT_OUT.with_name("results-quick.json")
"""A quick run writes here by default, so it does not overwrite the full results."""
PACKAGES = (
    "langgraph",
    "langgraph-checkpoint-sqlite",
    "langgraph-supervisor",
    "langgraph-swarm",
    "langchain-core",
    "teamgraph",
)
COLUMNS = (
    "system",
    "workload",
    "R / messages",
    "calls",
    "overhead ms/call",
    "db bytes",
    "bytes/msg",
    "peak RSS MB",
    "seconds",
    "note",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: each workload's quick parameter sets only")
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="run only these workloads (names or shell-style patterns)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"where to write the JSON results (default: {DEFAULT_OUT}, or {QUICK_OUT.name} next to it with --quick)",
    )
    parser.add_argument("--list", action="store_true", help="list workloads and exit")
    return parser.parse_args(argv)


def select(workloads: dict[str, Workload], patterns: list[str] | None) -> dict[str, Workload]:
    """The workloads whose name matches one of `patterns` (all of them if None)."""
    if not patterns:
        return dict(workloads)
    chosen = {n: w for n, w in workloads.items() if any(fnmatch.fnmatch(n, p) for p in patterns)}
    unknown = [p for p in patterns if not any(fnmatch.fnmatch(n, p) for n in workloads)]
    if unknown:
        sys.exit(f"unknown workload(s): {', '.join(unknown)}; known: {', '.join(workloads)}")
    return chosen


def run_all(workloads: dict[str, Workload], quick: bool) -> list[dict]:
    """Run each workload's parameter sets in fresh processes; report progress on stderr.

    With `repeats` > 1 (full runs), the fastest successful run of a set is kept and
    the row lists every run's seconds in `runs_seconds`.
    """
    rows = []
    for name, workload in workloads.items():
        repeats = 1 if quick else max(1, workload.repeats)
        for params in workload.param_sets(quick):
            runs = []
            for i in range(repeats):
                run = f" (run {i + 1}/{repeats})" if repeats > 1 else ""
                print(f"running {name} {json.dumps(params)}{run} ...", file=sys.stderr, flush=True)
                start = time.perf_counter()
                row = run_in_subprocess(name, params, workload.timeout_s)
                status = "FAILED" if "error" in row else "ok"
                print(f"  {status} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
                runs.append(row)
            rows.append(fastest(runs))
    return rows


def fastest(runs: list[dict]) -> dict:
    """The successful run with the least wall time (or the first failure)."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    best = dict(min(ok, key=lambda r: r.get("seconds", float("inf"))))
    if len(runs) > 1:
        best["runs_seconds"] = [r.get("seconds") for r in ok]
        best["runs_failed"] = len(runs) - len(ok)
    return best


def machine_info() -> dict:
    """Platform, Python, CPU and the versions of the packages being compared."""
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "packages": {name: _version(name) for name in PACKAGES},
    }


def describe_machine(info: dict) -> str:
    """One line naming the host a run had (figures of runs on different CPUs do not compare)."""
    packages = info.get("packages") or {}
    versions = ", ".join(f"{name} {packages[name]}" for name in ("langgraph", "langchain-core") if packages.get(name))
    cpu = f"{info.get('cpu_model') or '?'} ({info.get('cpu_count')} CPUs)"
    return f"machine: {cpu}, Python {info.get('python')}, {versions}"


def _cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _version(package: str) -> str | None:
    """Installed version of `package`, or None."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def write_results(path: Path, rows: list[dict], quick: bool, registry: Registry, extra: dict | None = None) -> None:
    """Write rows, machine info, the date (and targets, cadence table) as JSON."""
    payload = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "machine": machine_info(),
        "import_errors": registry.errors,
        "results": rows,
        **(extra or {}),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


def _human_bytes(n: float | None) -> str:
    """1234567 -> '1.23 MB'."""
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return "-"


def _num(value: float | None, fmt: str) -> str:
    """Format a number, '-' when missing."""
    return "-" if value is None else format(value, fmt)


def table_row(row: dict) -> tuple[str, ...]:
    """One printed line of the results table."""
    if "error" in row:
        first = row["error"].splitlines()[-1][:60]
        return (row["workload_name"], "ERROR", json.dumps(row["params"]), first, "", "", "", "", "", "")
    size = f"R={row['rounds']}" if "rounds" in row else ",".join(f"{k}={v}" for k, v in row["params"].items())
    return (
        row["system"],
        row["workload"],
        f"{size} / {row.get('messages', '-')}",
        str(row.get("model_calls", "-")),
        _num(row.get("overhead_ms_per_call"), ".1f"),
        _human_bytes(row.get("db_bytes")),
        _human_bytes(row.get("bytes_per_message")),
        _num(row.get("peak_rss_mb"), ".0f"),
        _num(row.get("seconds"), ".2f"),
        row.get("note", ""),
    )


def format_table(rows: list[dict]) -> str:
    """Plain-text table of the results, columns padded to their widest cell."""
    return format_lines(COLUMNS, [table_row(r) for r in rows])


def format_lines(columns: tuple[str, ...], body: list[tuple[str, ...]]) -> str:
    """Plain-text table, columns padded to their widest cell (the last one is not)."""
    lines = [columns] + body
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    widths[-1] = len(columns[-1])
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def report_targets(rows: list[dict], quick: bool) -> dict:
    """Print the issue's targets (PASS / MISS) and the snapshot-cadence table.

    A quick run is a smoke check: no thresholds, so no targets table.
    """
    cadences = targets.cadence_rows(rows)
    if cadences:
        print(
            "\nDeltaChannel snapshot cadence (teamgraph.state.HISTORY_SNAPSHOT_FREQUENCY): "
            "storage vs resume (fresh process: open, get_state, one step)"
        )
        print(format_lines(targets.CADENCE_COLUMNS, [targets.cadence_table_row(c) for c in cadences]))
    if quick:
        print("\nquick run: smoke check only, targets not evaluated")
        return {"cadence": cadences}
    evaluated = targets.evaluate(rows)
    print("\ntargets (issue 6)")
    print(
        format_lines(
            targets.TARGET_COLUMNS,
            [tuple(t[c] for c in ("section", "target", "measured", "status", "note")) for t in evaluated],
        )
    )
    issue10 = targets_issue10.evaluate(rows)
    print("\nissue 10 (README table)")
    print(targets_issue10.markdown(issue10))
    issue29 = targets_issue29.evaluate(rows)
    print("\ntargets (issue 29: what a team gets by default, the Team's saver)")
    print(format_lines(targets.TARGET_COLUMNS, [tuple(t[c] for c in targets.TARGET_COLUMNS) for t in issue29]))
    return {"targets": evaluated, "targets_issue10": issue10, "targets_issue29": issue29, "cadence": cadences}


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit code 1 if any workload (or workload module) failed."""
    args = parse_args(argv)
    registry = load_registry()
    if args.list:
        for name, workload in registry.workloads.items():
            print(f"{name}: {(workload.description or '').strip()}")
        return 0
    chosen = select(registry.workloads, args.only)
    print(describe_machine(machine_info()))
    rows = run_all(chosen, args.quick)
    print(format_table(rows))
    extra = report_targets(rows, args.quick)
    out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    write_results(out, rows, args.quick, registry, extra)
    print(f"\nwrote {out}")
    failed = any("error" in r for r in rows) or bool(registry.errors)
    return 1 if failed else 0
