"""Issue 10's table ("No lockstep"), evaluated on one run's rows: now vs target, PASS/MISS,
and the baselines of the same run as ratios.

`evaluate(rows)` returns one record per figure of the issue's table; `markdown(records)`
renders them for the README. A figure whose rows are missing (e.g. with --only) is n/a.
"""

from __future__ import annotations

from bench.targets import _fmt_bytes, _target, cpu_ms_per_call, find

COLUMNS = ("section", "target", "measured", "status", "note")


def _ratio_note(a: dict | None, b: dict | None, field: str, label: str) -> str:
    """`label a/b` for one field of two rows, or '' when a row is missing."""
    if not (a and b and a.get(field) and b.get(field)):
        return ""
    return f"{label} {a[field] / b[field]:.2f}"


def _per_call(row: dict | None) -> float | None:
    """Checkpoints written per model call (one checkpoint row = one saver `put`)."""
    if not row or not row.get("checkpoints") or not row.get("model_calls"):
        return None
    return row["checkpoints"] / row["model_calls"]


def makespan_targets(rows: list[dict]) -> list[dict]:
    """The two makespan figures: uniform 20-80 ms (8 members) and lognormal (8 and 16)."""
    out = []
    par = find(rows, "teamgraph-parallel", members=8, steps=10, max_parallel=8)
    out.append(
        _target(
            "10",
            "makespan / critical path, 8 members x 10 steps, 20-80 ms, default policy <= 1.10",
            f"{par['makespan_over_critical']:.2f}" if par else "-",
            par["makespan_over_critical"] <= 1.10 if par else None,
            f"lockstep bound with zero overhead {par['lockstep_over_critical']:.2f}" if par else "",
        )
    )
    tg = [find(rows, "teamgraph-lognormal", members=n) for n in (8, 16)]
    sup = [find(rows, "supervisor-lognormal", members=n) for n in (8, 16)]
    swarm = [find(rows, "swarm-lognormal", members=n) for n in (8, 16)]
    have = all(tg)
    notes = []
    for n, a, b, c in zip((8, 16), tg, sup, swarm, strict=True):
        parts = [f"{x['system']} {x['makespan_over_critical']:.2f}" for x in (b, c) if x]
        if a and parts:
            notes.append(
                f"{n} members: "
                + ", ".join(parts)
                + " (one worker at a time); teamgraph / supervisor "
                + (f"{a['makespan_s'] / b['makespan_s']:.2f}" if b else "-")
            )
    out.append(
        _target(
            "10",
            "makespan / critical path, lognormal (median 40 ms, sigma 0.8), 8 and 16 members, "
            "max_parallel = members <= 1.15",
            " and ".join(f"{r['makespan_over_critical']:.2f}" for r in tg if r) or "-",
            all(r["makespan_over_critical"] <= 1.15 for r in tg) if have else None,
            "; ".join(notes),
        )
    )
    return out


def _slope(short: dict | None, long: dict | None) -> float | None:
    """Checkpoints per *additional* model call from the short run to the long one: what each
    call costs, without what every run writes once."""
    if not (_per_call(short) and _per_call(long)) or long["model_calls"] == short["model_calls"]:
        return None
    return (long["checkpoints"] - short["checkpoints"]) / (long["model_calls"] - short["model_calls"])


def checkpoint_target(rows: list[dict]) -> dict:
    """Checkpoints per model call, on the sequential delegation workload (R = 10 -> 100).

    NOTE: judged on the slope (checkpoints per additional call). A run also writes a fixed
    few: LangGraph's input checkpoint and its START superstep (every StateGraph run writes
    both, the baselines' included) and the first pass, which issues the leader's first
    step. Those are per run, not per call; the plain quotient is shown beside the slope.
    """
    a, b = find(rows, "teamgraph", rounds=100), find(rows, "supervisor", rounds=100)
    short = find(rows, "teamgraph", rounds=10)
    swarm = find(rows, "swarm", rounds=100)
    lg = find(rows, "teamgraph-lognormal", members=8)
    slope = _slope(short, a)
    notes = [f"{x['system']} {_per_call(x):.2f}" for x in (b, swarm) if _per_call(x)]
    if a and a.get("model_calls"):
        extra = a["checkpoints"] - a["model_calls"]
        counts = f"R = 100: {a['checkpoints']} checkpoints for {a['model_calls']} calls ({_per_call(a):.3f})"
        notes.insert(0, f"{counts}, {extra:+d} per run (LangGraph's input and START, the first pass)")
    if lg:
        notes.append(
            f"lognormal 8 members: {lg['puts_per_model_call']:.2f} (steps that finish together share a superstep)"
        )
    return _target(
        "10",
        "checkpoints written per model call (delegation, R = 10 -> 100) <= 1",
        f"{slope:.2f}" if slope is not None else "-",
        slope <= 1.0 if slope is not None else None,
        "; ".join(notes),
    )


def _floor_note(rows: list[dict]) -> str:
    """What one prebuilt ReAct agent costs per model call on the same saver, model and tool."""
    floor = [find(rows, "react", rounds=r, saver="teamgraph") for r in (10, 100)]
    if not all(floor):
        return ""
    values = " / ".join(f"{r['overhead_ms_per_call']:.1f}" for r in floor if r)
    return f"a lone prebuilt ReAct agent (create_react_agent, one tool) on the Team's saver: {values} ms"


def framework_targets(rows: list[dict]) -> list[dict]:
    """Framework time per model call with the Team's saver, and the ratios to the supervisor."""
    out = []
    own = [find(rows, "teamgraph", rounds=r, saver="teamgraph") for r in (10, 100)]
    if all(own):
        values = [r["overhead_ms_per_call"] for r in own]
        flat = max(values) / min(values)
        cpu = " / ".join(f"{cpu_ms_per_call(r):.1f}" for r in own if cpu_ms_per_call(r) is not None)
        out.append(
            _target(
                "10",
                "framework time per model call, R = 10 and 100 (Team's saver) <= 2 ms, flat",
                " / ".join(f"{v:.1f}" for v in values) + f" ms (x{flat:.2f}); CPU {cpu} ms",
                max(values) <= 2.0 and flat <= 1.2,
                _floor_note(rows),
            )
        )
    else:
        out.append(_target("10", "framework time per model call (Team's saver) <= 2 ms, flat", "-", None))
    for r, limit in ((10, 0.3), (100, 0.1)):
        a, b = find(rows, "teamgraph", rounds=r), find(rows, "supervisor", rounds=r)
        swarm = find(rows, "swarm", rounds=r)
        ok = None
        measured = "-"
        note = _ratio_note(a, swarm, "overhead_ms_per_call", "to langgraph-swarm")
        if a and b:
            # NOTE: the verdict compares like with like (both on LangGraph's SqliteSaver); the
            # Team's own saver, what `Team(home=...)` opens, is shown beside it.
            ratio = a["overhead_ms_per_call"] / b["overhead_ms_per_call"]
            measured, ok = f"{ratio:.3f}", ratio <= limit
            own = find(rows, "teamgraph", rounds=r, saver="teamgraph")
            if own:
                own_ratio = f"with the Team's saver {own['overhead_ms_per_call'] / b['overhead_ms_per_call']:.3f}"
                note = "; ".join(part for part in (note, own_ratio) if part)
            # NOTE: the floor: one prebuilt ReAct agent on the same saver, model and tool.
            floor = _ratio_note(find(rows, "react", rounds=r, saver="sqlite"), b, "overhead_ms_per_call", "")
            if floor:
                note = "; ".join(part for part in (note, f"a lone prebuilt ReAct agent{floor}") if part)
        target = f"ratio to langgraph-supervisor, framework time per call, R = {r} <= {limit}"
        out.append(_target("10", target, measured, ok, note))
    return out


def storage_targets(rows: list[dict]) -> list[dict]:
    """SQLite bytes per message, and resume at 5 000 vs 500 messages."""
    st = {m: find(rows, "teamgraph-storage", messages=m) for m in (1000, 5000)}
    out = []
    sup = find(rows, "supervisor", rounds=100)
    if all(st.values()):
        values = [r["bytes_per_message"] for r in st.values()]
        growth = values[1] / values[0]
        note = f"langgraph-supervisor at R = 100: {_fmt_bytes(sup['bytes_per_message'])}" if sup else ""
        out.append(
            _target(
                "10",
                "SQLite bytes per message <= 4 KB, flat +-20 % from 1 000 to 5 000",
                " / ".join(_fmt_bytes(v) for v in values) + f" (x{growth:.2f})",
                max(values) <= 4000 and abs(growth - 1) <= 0.2,
                note,
            )
        )
    else:
        out.append(_target("10", "SQLite bytes per message <= 4 KB, flat", "-", None))
    small, big = find(rows, "teamgraph-storage", messages=500), st[5000]
    if small and big and "resume" in small and "resume" in big:
        ratio = big["resume"]["in_process_ms"] / small["resume"]["in_process_ms"]
        # NOTE: the fastest of the repeats decides (contention only adds time); the medians' ratio is shown too.
        medians = [r["resume"].get("median_in_process_ms") for r in (small, big)]
        median = ""
        if all(medians):
            median = f"; medians {medians[0]:.0f} -> {medians[1]:.0f} ms (x{medians[1] / medians[0]:.2f})"
        out.append(
            _target(
                "10",
                "resume (open, state, one step) at 5 000 vs 500 messages <= 2x",
                f"{ratio:.2f}x",
                ratio <= 2.0,
                f"fastest of {big['resume'].get('repeats', '?')}: "
                f"{small['resume']['in_process_ms']:.0f} -> {big['resume']['in_process_ms']:.0f} ms{median}",
            )
        )
    else:
        out.append(_target("10", "resume at 5 000 vs 500 messages <= 2x", "-", None))
    return out


def _growth(small: dict | None, big: dict | None, field: str) -> str:
    """`a -> b (xg)` of one field from the ~80 to the ~300 messages row, or '' when missing."""
    if not (small and big and small.get(field) and big.get(field)):
        return ""
    return f"{_fmt_bytes(small[field])} -> {_fmt_bytes(big[field])} (x{big[field] / small[field]:.2f})"


def observed_targets(rows: list[dict]) -> list[dict]:
    """Bytes per message a `values` stream and a LangSmith trace send: flat from 80 to 300.

    The trace's note splits off the LLM runs' inputs (each call's prompt, the agent's whole view:
    quadratic in a run, as in any framework that traces its model calls), and gives
    langgraph-supervisor's figures from the same run.
    """
    small, big = find(rows, "teamgraph-observed", messages=80), find(rows, "teamgraph-observed", messages=300)
    sup = find(rows, "supervisor-observed", messages=80), find(rows, "supervisor-observed", messages=300)
    out = []
    for field, what in (
        ("values_bytes_per_message", "a `values` stream (Studio)"),
        ("trace_bytes_per_message", "a LangSmith trace"),
    ):
        if small and big:
            growth = big[field] / small[field]
            notes = [f"{small['messages']} and {big['messages']} messages"]
            if field.startswith("trace"):
                for part, label in (("trace_prompt", "LLM prompts"), ("trace_other", "the rest")):
                    if split := _growth(small, big, f"{part}_bytes_per_message"):
                        notes.append(f"{label} {split}")
            if baseline := _growth(*sup, field):
                notes.append(f"langgraph-supervisor {baseline}")
            out.append(
                _target(
                    "10",
                    f"bytes per message {what}: at ~300 messages <= 1.3 x at ~80",
                    f"{_fmt_bytes(small[field])} -> {_fmt_bytes(big[field])} (x{growth:.2f})",
                    growth <= 1.3,
                    "; ".join(notes),
                )
            )
        else:
            out.append(_target("10", f"bytes per message {what}: flat", "-", None))
    return out


def evaluate(rows: list[dict]) -> list[dict]:
    """Every figure of issue 10's table: PASS / MISS / n/a, with the baselines' ratios."""
    return [
        *makespan_targets(rows),
        checkpoint_target(rows),
        *framework_targets(rows),
        *storage_targets(rows),
        *observed_targets(rows),
    ]


def markdown(records: list[dict]) -> str:
    """The README's table."""
    lines = ["| figure (issue 10) | measured | | notes |", "|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['target']} | {r['measured']} | **{r['status']}** | {r['note']} |")
    return "\n".join(lines)
