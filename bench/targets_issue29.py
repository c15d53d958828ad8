"""Issue 29's targets ("The team is the graph"), evaluated on one run's rows.

Issue 29 relaxed issue 10's per-call figures and judges what a team gets by default:
the saver ``Team(home=...)`` opens. Each record says what was measured, PASS/MISS (n/a
when the run lacks the rows, e.g. with ``--only``), and beside it the same figure on
LangGraph's ``SqliteSaver`` and the floor of the same run (``bench/floor_workloads.py``).
"""

from __future__ import annotations

from bench.targets import _fmt_bytes, _target, find
from bench.targets_issue10 import _growth, _slope
from bench.teamgraph_workloads import MODEL_LIKE_PARALLEL

SECTION = "29"
MAKESPAN_LIMIT = 1.15


FLOORS = (
    ({}, "the floor (plain LangGraph, same calls)"),
    ({"shape": "role"}, "with a role subgraph and LangChain's model and tool calls (no team)"),
)
"""The floors shown beside the makespan: LangGraph alone, then what any team built on
LangGraph and LangChain in issue 29's shape does a call (``bench/floor_workloads.py``)."""


def _floor(rows: list[dict], latency: str, sizes: tuple[int, ...]) -> str:
    shown = []
    for shape, label in FLOORS:
        given = {"latency": latency, "supersteps": 2, "cpu_ms": 0, **shape}
        found = [find(rows, "langgraph-floor", members=n, **given) for n in sizes]
        if all(found):
            shown.append(f"{label} " + " and ".join(f"{r['makespan_over_critical']:.2f}" for r in found if r))
    return "; ".join(shown)


def makespan_targets(rows: list[dict]) -> list[dict]:
    """Makespan over the critical path: lognormal, 8 and 16 members; uniform 20-80 ms, 8 members."""
    cases = [
        ("teamgraph-lognormal", "lognormal", "lognormal (median 40 ms, sigma 0.8), 8 and 16 members", (8, 16)),
        ("teamgraph-parallel", "uniform", "uniform 20-80 ms, 8 members x 10 calls", (8,)),
    ]
    out = []
    for workload, latency, label, sizes in cases:
        extra = {"steps": 10, "max_parallel": 8} if workload == "teamgraph-parallel" else {}
        own = [find(rows, workload, members=n, saver="teamgraph", **extra) for n in sizes]
        stock = [find(rows, workload, members=n, **extra) for n in sizes]
        measured = " and ".join(f"{r['makespan_over_critical']:.2f}" for r in own if r) or "-"
        ok = all(r["makespan_over_critical"] <= MAKESPAN_LIMIT for r in own) if all(own) else None
        notes = []
        if all(stock):
            shown = " and ".join(f"{r['makespan_over_critical']:.2f}" for r in stock)
            notes.append(f"on LangGraph's SqliteSaver {shown}")
        if floor := _floor(rows, latency, sizes):
            notes.append(floor)
        if latency == "uniform" and (slow := find(rows, workload, **MODEL_LIKE_PARALLEL)):
            notes.append(f"with 1-3 s calls (8 members x 3) {slow['makespan_over_critical']:.3f}")
        target = f"makespan / critical path, {label}, the Team's saver <= {MAKESPAN_LIMIT}"
        out.append(_target(SECTION, target, measured, ok, "; ".join(notes)))
    return out


def framework_targets(rows: list[dict]) -> list[dict]:
    """Framework time per model call against langgraph-supervisor's (R = 10, 100), and flat."""
    out = []
    own = {r: find(rows, "teamgraph", rounds=r, saver="teamgraph") for r in (10, 100)}
    for r, limit in ((10, 0.8), (100, 0.25)):
        a, b, stock = own[r], find(rows, "supervisor", rounds=r), find(rows, "teamgraph", rounds=r)
        ok, measured, note = None, "-", ""
        if a and b:
            ratio = a["overhead_ms_per_call"] / b["overhead_ms_per_call"]
            ok = ratio <= limit
            measured = f"{ratio:.3f} ({a['overhead_ms_per_call']:.1f} / {b['overhead_ms_per_call']:.1f} ms)"
            if stock:
                note = f"on LangGraph's SqliteSaver {stock['overhead_ms_per_call'] / b['overhead_ms_per_call']:.3f}"
        target = f"framework time per model call / langgraph-supervisor's, R = {r}, the Team's saver <= {limit}"
        out.append(_target(SECTION, target, measured, ok, note))
    if all(own.values()):
        values = [own[r]["overhead_ms_per_call"] for r in (10, 100)]
        flat = max(values) / min(values)
        shown = " / ".join(f"{v:.1f}" for v in values) + f" ms (x{flat:.2f})"
        target = "framework time per model call flat with run length (R = 10 -> 100)"
        out.append(_target(SECTION, target, shown, flat <= 1.2))
    else:
        out.append(_target(SECTION, "framework time per model call flat with run length", "-", None))
    return out


def checkpoint_target(rows: list[dict]) -> dict:
    """Checkpoints per model call (the slope from R = 10 to 100: what each call adds)."""
    slope = _slope(find(rows, "teamgraph", rounds=10), find(rows, "teamgraph", rounds=100))
    shown = f"{slope:.2f}" if slope is not None else "-"
    return _target(SECTION, "checkpoints per model call <= 2", shown, slope <= 2.0 if slope is not None else None)


def storage_targets(rows: list[dict]) -> list[dict]:
    """SQLite bytes per message at 1 000 and 5 000 messages, and resume at 5 000 vs 500."""
    out = []
    st = [find(rows, "teamgraph-storage", messages=m) for m in (1000, 5000)]
    if all(st):
        values = [r["bytes_per_message"] for r in st]
        growth = values[1] / values[0]
        shown = " / ".join(_fmt_bytes(v) for v in values) + f" (x{growth:.2f})"
        ok = max(values) <= 4000 and abs(growth - 1) <= 0.2
        out.append(_target(SECTION, "SQLite bytes per message <= 4 KB at 1 000 and 5 000, flat", shown, ok))
    else:
        out.append(_target(SECTION, "SQLite bytes per message <= 4 KB, flat", "-", None))
    small, big = find(rows, "teamgraph-storage", messages=500), st[1]
    if small and big and "resume" in small and "resume" in big:
        ratio = big["resume"]["in_process_ms"] / small["resume"]["in_process_ms"]
        shown = f"{ratio:.2f}x ({small['resume']['in_process_ms']:.0f} -> {big['resume']['in_process_ms']:.0f} ms)"
        out.append(_target(SECTION, "resume at 5 000 vs 500 messages <= 2x", shown, ratio <= 2.0))
    else:
        out.append(_target(SECTION, "resume at 5 000 vs 500 messages <= 2x", "-", None))
    return out


def observed_targets(rows: list[dict]) -> list[dict]:
    """The `values` stream and what teamgraph adds to a trace (model prompts aside): flat per message."""
    small, big = find(rows, "teamgraph-observed", messages=80), find(rows, "teamgraph-observed", messages=300)
    out = []
    for field, what in (
        ("values_bytes_per_message", "the `values` stream"),
        ("trace_other_bytes_per_message", "a LangSmith trace, model prompts aside"),
    ):
        shown = _growth(small, big, field)
        ok = big[field] / small[field] <= 1.3 if shown and small and big else None
        out.append(_target(SECTION, f"bytes per message of {what}: flat (~80 -> ~300 messages)", shown or "-", ok))
    return out


def evaluate(rows: list[dict]) -> list[dict]:
    """Every target of issue 29: PASS / MISS / n/a."""
    return [
        *makespan_targets(rows),
        *framework_targets(rows),
        checkpoint_target(rows),
        *storage_targets(rows),
        *observed_targets(rows),
    ]
