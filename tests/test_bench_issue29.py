"""Issue 29's targets table: judged on the Team's saver, with LangGraph's saver and the floor beside."""

from __future__ import annotations

from bench import targets_issue29
from bench.teamgraph_workloads import MODEL_LIKE_PARALLEL
from tests.test_bench_issue10 import _row


def _makespan(workload: str, params: dict, ratio: float) -> dict:
    return _row(workload, params, makespan_over_critical=ratio)


FLOOR = {"members": 8, "latency": "uniform", "supersteps": 2, "cpu_ms": 0}
ROWS = [
    _makespan("teamgraph-lognormal", {"members": 8, "saver": "teamgraph"}, 1.12),
    _makespan("teamgraph-lognormal", {"members": 16, "saver": "teamgraph"}, 1.15),
    _makespan("teamgraph-lognormal", {"members": 8}, 1.16),
    _makespan("teamgraph-lognormal", {"members": 16}, 1.20),
    _makespan("teamgraph-parallel", {"members": 8, "steps": 10, "max_parallel": 8, "saver": "teamgraph"}, 1.19),
    _makespan("teamgraph-parallel", {"members": 8, "steps": 10, "max_parallel": 8}, 1.24),
    _makespan("langgraph-floor", FLOOR, 1.05),
    _makespan("langgraph-floor", {**FLOOR, "shape": "role"}, 1.11),
    _makespan("teamgraph-parallel", MODEL_LIKE_PARALLEL, 1.0101),
    _row("teamgraph", {"rounds": 10}, checkpoints=23, model_calls=10, overhead_ms_per_call=6.0),
    _row("teamgraph", {"rounds": 100}, checkpoints=203, model_calls=100, overhead_ms_per_call=5.8),
    _row("teamgraph", {"rounds": 10, "saver": "teamgraph"}, overhead_ms_per_call=4.8),
    _row("teamgraph", {"rounds": 100, "saver": "teamgraph"}, overhead_ms_per_call=4.9),
    _row("supervisor", {"rounds": 10}, overhead_ms_per_call=6.2),
    _row("supervisor", {"rounds": 100}, overhead_ms_per_call=20.0),
    _row("teamgraph-storage", {"messages": 1000}, bytes_per_message=4500.0),
    _row("teamgraph-storage", {"messages": 5000}, bytes_per_message=5200.0),
]


def test_issue29_judges_what_a_team_gets_by_default_and_shows_the_rest_beside():
    records = {r["target"]: r for r in targets_issue29.evaluate(ROWS)}

    def record(prefix: str) -> dict:
        return next(r for target, r in records.items() if target.startswith(prefix))

    lognormal = record("makespan / critical path, lognormal")
    assert (lognormal["measured"], lognormal["status"]) == ("1.12 and 1.15", "PASS")
    assert "on LangGraph's SqliteSaver 1.16 and 1.20" in lognormal["note"]
    uniform = record("makespan / critical path, uniform")
    assert (uniform["measured"], uniform["status"]) == ("1.19", "MISS")
    assert "the floor (plain LangGraph, same calls) 1.05; with a role subgraph" in uniform["note"]
    assert "model and tool calls (no team) 1.11" in uniform["note"]
    assert "with 1-3 s calls (8 members x 3) 1.010" in uniform["note"]
    short = record("framework time per model call / langgraph-supervisor's, R = 10,")
    long = record("framework time per model call / langgraph-supervisor's, R = 100,")
    assert (short["status"], long["status"]) == ("PASS", "PASS")
    assert short["measured"].startswith("0.774") and "on LangGraph's SqliteSaver 0.968" in short["note"]
    assert record("framework time per model call flat")["status"] == "PASS"
    assert (record("checkpoints per model call")["measured"], record("checkpoints")["status"]) == ("2.00", "PASS")
    storage = record("SQLite bytes per message")
    assert (storage["measured"], storage["status"]) == ("4.5 KB / 5.2 KB (x1.16)", "MISS")
    assert record("resume")["status"] == "n/a"  # NOTE: no resume rows in this run
    assert {r["status"] for r in records.values() if "stream" in r["target"] or "trace" in r["target"]} == {"n/a"}


def test_the_role_floor_runs_each_call_through_a_model_a_role_subgraph_and_a_tool(tmp_path):
    from bench.floor_workloads import floor_workload

    row = floor_workload({"members": 2, "steps": 2, "latency": "uniform", "shape": "role"}, tmp_path)
    assert (row["shape"], row["model_calls"], row["messages"]) == ("role", 4, 8)
    assert row["makespan_over_critical"] >= 1.0
