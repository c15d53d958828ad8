"""The benchmark pieces of issue 10: the fake LangSmith endpoint and the README's targets table."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import targets_issue10
from bench.fake_langsmith import FakeLangSmith

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent

TRACED_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from bench.fake_langsmith import FakeLangSmith
    from langchain_core.runnables import RunnableLambda

    with FakeLangSmith() as endpoint:
        os.environ.update({"LANGSMITH_ENDPOINT": endpoint.url, "LANGSMITH_TRACING": "true",
                           "LANGSMITH_API_KEY": "dummy", "LANGSMITH_PROJECT": "t"})
        chain = RunnableLambda(lambda text: text.upper()).with_config(run_name="shout")
        for size in (10, int(sys.argv[1])):
            endpoint.flush()
            before = endpoint.bytes_received
            chain.invoke("x" * size)
            endpoint.flush()
            print(json.dumps({"size": size, "bytes": endpoint.bytes_received - before,
                              "paths": sorted(endpoint.paths)}))
    """
)


def test_the_fake_langsmith_endpoint_counts_what_a_traced_run_sends():
    out = subprocess.run(
        [sys.executable, "-c", TRACED_CHILD, "200000"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    small, big = (json.loads(line) for line in out.stdout.splitlines() if line.startswith("{"))
    assert small["bytes"] > 0
    assert any(p.startswith("/runs") for p in big["paths"])
    # the 200 000-character input and output are both in the trace, so the bytes grow with them
    assert big["bytes"] >= 2 * 200_000 > 100 * small["bytes"]


BROKEN_DOWN_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from bench.fake_langsmith import FakeLangSmith
    from langchain_core.runnables import RunnableLambda

    with FakeLangSmith() as endpoint:
        os.environ.update({"LANGSMITH_ENDPOINT": endpoint.url, "LANGSMITH_TRACING": "true",
                           "LANGSMITH_API_KEY": "dummy", "LANGSMITH_PROJECT": "t"})
        inner = RunnableLambda(lambda text: text[:10]).with_config(run_name="cut")
        outer = RunnableLambda(lambda text: inner.invoke(text) + "!").with_config(run_name="outer")
        for _ in range(3):
            outer.invoke("x" * int(sys.argv[1]))
        endpoint.flush()
        print(json.dumps({key: {"runs": run.runs, "total": run.total, **run.parts}
                          for key, run in endpoint.breakdown().items()}))
    """
)


def test_the_fake_langsmith_endpoint_breaks_the_bytes_down_by_run_and_part():
    out = subprocess.run(
        [sys.executable, "-c", BROKEN_DOWN_CHILD, "50000"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    runs = json.loads(out.stdout.splitlines()[-1])
    assert set(runs) == {"chain outer", "chain cut"}
    assert runs["chain outer"]["runs"] == runs["chain cut"]["runs"] == 3
    # Both take the 50 000-character input; only the inner run's output is short.
    for key in ("chain outer", "chain cut"):
        assert 3 * 50_000 <= runs[key]["inputs"] < 3 * 51_000, runs[key]
        assert runs[key]["total"] == sum(v for k, v in runs[key].items() if k not in ("runs", "total"))
    assert runs["chain cut"]["outputs"] < 3 * 100 and runs["chain outer"]["outputs"] < 3 * 100


def test_the_fake_langsmith_endpoint_answers_info_and_stops():
    import urllib.request

    with FakeLangSmith() as endpoint:
        info = json.loads(urllib.request.urlopen(f"{endpoint.url}/info", timeout=5).read())
        request = urllib.request.Request(f"{endpoint.url}/runs/batch", data=b"12345", method="POST")
        assert urllib.request.urlopen(request, timeout=5).status == 200
        assert (endpoint.bytes_received, endpoint.requests) == (5, 1)
    assert "version" in info


def _row(workload: str, params: dict, **fields) -> dict:
    return {"workload_name": workload, "params": params, **fields}


def test_issue10_targets_pass_and_miss_by_their_thresholds():
    rows = [
        _row(
            "teamgraph-lognormal",
            {"members": 8},
            system="teamgraph",
            makespan_over_critical=1.10,
            makespan_s=1.0,
            puts_per_model_call=0.9,
        ),
        _row("teamgraph-lognormal", {"members": 16}, system="teamgraph", makespan_over_critical=1.20, makespan_s=1.2),
        _row(
            "supervisor-lognormal",
            {"members": 8},
            system="langgraph-supervisor",
            makespan_over_critical=6.0,
            makespan_s=5.0,
        ),
        # NOTE: 3 checkpoints per run on top of one per call: the slope is 1.00, the quotient not.
        _row("teamgraph", {"rounds": 10}, checkpoints=13, model_calls=10, overhead_ms_per_call=1.0),
        _row("teamgraph", {"rounds": 100}, checkpoints=103, model_calls=100, overhead_ms_per_call=1.0),
        _row(
            "teamgraph",
            {"rounds": 100, "saver": "teamgraph"},
            checkpoints=100,
            model_calls=100,
            overhead_ms_per_call=0.8,
        ),
        _row(
            "supervisor",
            {"rounds": 100},
            system="langgraph-supervisor",
            checkpoints=300,
            model_calls=100,
            overhead_ms_per_call=20.0,
        ),
        _row(
            "teamgraph-observed",
            {"messages": 80},
            messages=77,
            values_bytes_per_message=1000.0,
            trace_bytes_per_message=2000.0,
            trace_prompt_bytes_per_message=500.0,
            trace_other_bytes_per_message=1500.0,
        ),
        _row(
            "teamgraph-observed",
            {"messages": 300},
            messages=305,
            values_bytes_per_message=1200.0,
            trace_bytes_per_message=4000.0,
            trace_prompt_bytes_per_message=2500.0,
            trace_other_bytes_per_message=1500.0,
        ),
        _row("supervisor-observed", {"messages": 80}, messages=82, trace_bytes_per_message=3000.0),
        _row("supervisor-observed", {"messages": 300}, messages=302, trace_bytes_per_message=9000.0),
    ]
    records = {r["target"].split(" <=")[0].split(":")[0]: r for r in targets_issue10.evaluate(rows)}
    lognormal = next(r for k, r in records.items() if k.startswith("makespan / critical path, lognormal"))
    assert (lognormal["measured"], lognormal["status"]) == ("1.10 and 1.20", "MISS")
    assert "langgraph-supervisor 6.00" in lognormal["note"]
    checkpoints = next(r for k, r in records.items() if k.startswith("checkpoints written"))
    assert (checkpoints["measured"], checkpoints["status"]) == ("1.00", "PASS")
    assert "103 checkpoints for 100 calls (1.030), +3 per run" in checkpoints["note"]
    assert "langgraph-supervisor 3.00" in checkpoints["note"]
    ratio = next(r for k, r in records.items() if k.endswith("R = 100"))
    assert (ratio["measured"], ratio["status"]) == ("0.050", "PASS")
    assert "with the Team's saver 0.040" in ratio["note"]
    values = next(r for k, r in records.items() if "`values` stream" in k)
    trace = next(r for k, r in records.items() if "LangSmith trace" in k)
    assert (values["status"], trace["status"]) == ("PASS", "MISS")
    assert "LLM prompts 500 B -> 2.5 KB (x5.00)" in trace["note"]
    assert "the rest 1.5 KB -> 1.5 KB (x1.00)" in trace["note"]
    assert "langgraph-supervisor 3.0 KB -> 9.0 KB (x3.00)" in trace["note"]
    assert "langgraph-supervisor" not in values["note"]  # no supervisor values figures in these rows
    missing = next(r for k, r in records.items() if k.startswith("resume"))
    assert missing["status"] == "n/a"
    table = targets_issue10.markdown(targets_issue10.evaluate(rows))
    assert table.count("\n") == len(targets_issue10.evaluate(rows)) + 1


def test_checkpoints_per_call_are_judged_on_the_slope_between_run_lengths():
    def record(rows: list[dict]) -> dict:
        return targets_issue10.checkpoint_target(rows)

    two_per_call = [
        _row("teamgraph", {"rounds": 10}, checkpoints=23, model_calls=10),
        _row("teamgraph", {"rounds": 100}, checkpoints=203, model_calls=100),
    ]
    assert (record(two_per_call)["measured"], record(two_per_call)["status"]) == ("2.00", "MISS")
    only_long = [_row("teamgraph", {"rounds": 100}, checkpoints=100, model_calls=100)]
    assert (record(only_long)["measured"], record(only_long)["status"]) == ("-", "n/a")


def test_the_framework_time_is_shown_beside_what_one_prebuilt_react_agent_costs():
    rows = [
        _row("teamgraph", {"rounds": 10, "saver": "teamgraph"}, overhead_ms_per_call=2.5),
        _row("teamgraph", {"rounds": 100, "saver": "teamgraph"}, overhead_ms_per_call=2.6),
    ]
    floor = [
        _row("react", {"rounds": 10, "saver": "teamgraph"}, system="langgraph-react", overhead_ms_per_call=3.0),
        _row("react", {"rounds": 100, "saver": "teamgraph"}, system="langgraph-react", overhead_ms_per_call=9.0),
    ]
    (alone,) = (r for r in targets_issue10.framework_targets(rows) if r["target"].startswith("framework time"))
    (beside,) = (r for r in targets_issue10.framework_targets(rows + floor) if r["target"].startswith("framework time"))
    assert (alone["status"], beside["status"]) == ("MISS", "MISS")
    assert "ReAct" not in alone["note"]
    assert beside["note"].endswith("on the Team's saver: 3.0 / 9.0 ms")


def test_the_ratio_to_the_supervisor_is_shown_beside_one_prebuilt_react_agents():
    rows = [
        _row("teamgraph", {"rounds": 10}, overhead_ms_per_call=2.0),
        _row("supervisor", {"rounds": 10}, system="langgraph-supervisor", overhead_ms_per_call=4.0),
    ]
    floor = [_row("react", {"rounds": 10, "saver": "sqlite"}, system="langgraph-react", overhead_ms_per_call=3.0)]

    def ratio(rows: list[dict]) -> dict:
        return next(r for r in targets_issue10.framework_targets(rows) if r["target"].endswith("R = 10 <= 0.3"))

    assert (ratio(rows)["measured"], ratio(rows)["status"]) == ("0.500", "MISS")
    assert "ReAct" not in ratio(rows)["note"]
    assert ratio(rows + floor)["note"].endswith("a lone prebuilt ReAct agent 0.75")


def test_a_run_names_the_processor_it_ran_on():
    from bench.cli import describe_machine

    info = {"cpu_model": "AMD EPYC", "cpu_count": 2, "python": "3.11.7", "packages": {"langgraph": "1.2.24"}}
    assert describe_machine(info) == "machine: AMD EPYC (2 CPUs), Python 3.11.7, langgraph 1.2.24"
