"""Shared pieces of the scheduler prototypes (docs/scheduler.md): not teamgraph code.

- the workload: N members x 10 model calls, seeded lognormal latencies (median 40 ms,
  sigma 0.8, capped at 1 s); with ``chatty``, 4 messages between members; with ``human``,
  one member asks a person at its 5th call and continues once answered;
- a deterministic fake chat model: its answer is a hash of its input, so two runs give
  identical histories exactly when every call saw the same context; it streams its answer
  in 4 chunks (latency spread over them) when a streaming callback is attached;
- a SqliteSaver on a fresh file whose ``put`` calls are counted;
- a call log (one line per finished model call, flushed), to count calls across a kill -9;
- ``run_scenario``: one run in a child process, optionally killed with SIGKILL after a
  delay and resumed in a new process; the histories are compared with an uncrashed run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

CALLS_PER_MEMBER = 10
MEDIAN_S, SIGMA, CAP_S = 0.040, 0.8, 1.0
SEED = 7
SENDS = {("m0", 3): "m1", ("m0", 6): "m2", ("m1", 3): "m3", ("m1", 6): "m0"}
"""With ``chatty``: (sender, call index) -> receiver; 4 messages between members."""
ASKS = {("m2", 4)}
"""With ``human``: m2's 5th call asks a person and m2 waits for the answer."""
HUMAN_ANSWER = "use blue"


def merge(a: dict | None, b: dict) -> dict:
    """Reducer: a dict whose keys are replaced one by one."""
    return {**(a or {}), **b}


def append_lists(a: dict | None, b: dict) -> dict:
    """Reducer: a dict of lists, each extended by the update's list for its key."""
    out = dict(a or {})
    for key, items in b.items():
        out[key] = out.get(key, []) + items
    return out


def member_names(n: int) -> list[str]:
    """m0 .. m{n-1}."""
    return [f"m{i}" for i in range(n)]


def latency_plan(n: int) -> dict[str, list[float]]:
    """Seeded lognormal latencies per member and call (the shared toys' seed and shape)."""
    rng = random.Random(SEED)
    return {
        a: [min(rng.lognormvariate(math.log(MEDIAN_S), SIGMA), CAP_S) for _ in range(CALLS_PER_MEMBER)]
        for a in member_names(n)
    }


def critical_path(plan: dict[str, list[float]]) -> float:
    """The slowest member's own total latency (no scheduler can beat it)."""
    return max(sum(v) for v in plan.values())


def lockstep_bound(plan: dict[str, list[float]]) -> float:
    """Zero-overhead makespan when call j of every member shares superstep j."""
    return sum(max(v[j] for v in plan.values()) for j in range(CALLS_PER_MEMBER))


def answer_for(agent: str, k: int, prompt: list[str]) -> str:
    """The fake model's answer: a function of the whole input (and who/which call)."""
    digest = hashlib.sha1("\n".join(prompt).encode()).hexdigest()[:10]
    return f"{agent}.{k}:{digest}"


class CallLog:
    """Appends `agent k` per finished model call to a file (flushed: survives SIGKILL)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.count = 0
        self._lock = threading.Lock()

    def record(self, agent: str, k: int) -> None:
        with self._lock:
            self.count += 1
            if self.path:
                with open(self.path, "a") as fh:
                    fh.write(f"{agent} {k}\n")


class FakeModel(BaseChatModel):
    """Deterministic chat model: sleeps the planned latency, answers `answer_for(...)`."""

    plan: dict
    log: Any

    @property
    def _llm_type(self) -> str:
        return "prototype-fake"

    def _answer(self, messages: list[BaseMessage], agent: str, k: int) -> str:
        return answer_for(agent, k, [str(m.content) for m in messages])

    def _generate(self, messages, stop=None, run_manager=None, *, agent: str = "", k: int = 0, **kw):
        time.sleep(self.plan[agent][k])
        self.log.record(agent, k)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._answer(messages, agent, k)))])

    def _stream(
        self, messages, stop=None, run_manager=None, *, agent: str = "", k: int = 0, **kw
    ) -> Iterator[ChatGenerationChunk]:
        text = self._answer(messages, agent, k)
        parts = [text[i : i + 4] for i in range(0, len(text), 4)][:3]
        parts.append(text[sum(len(p) for p in parts) :])
        for part in parts:
            time.sleep(self.plan[agent][k] / len(parts))
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=part))
            if run_manager:
                run_manager.on_llm_new_token(part, chunk=chunk)
            yield chunk
        self.log.record(agent, k)


class Prototype:
    """What every prototype's team holds: the latency plan, the fake model, the members, the flags."""

    def __init__(self, members: int, *, chatty: bool, human: str | None, log: CallLog) -> None:
        self.plan = latency_plan(members)
        self.model = FakeModel(plan=self.plan, log=log)
        self.names = member_names(members)
        self.chatty, self.human = chatty, human


def counted_saver(path: str, fresh: bool) -> tuple[SqliteSaver, dict]:
    """A SqliteSaver (WAL) on `path`; `counts` tracks `put` and `put_writes` calls."""
    if fresh:
        for p in (path, path + "-wal", path + "-shm"):
            if os.path.exists(p):
                os.remove(p)
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    saver = SqliteSaver(conn)
    saver.setup()
    counts = {"put": 0, "put_writes": 0}
    put, put_writes = saver.put, saver.put_writes

    def counted_put(*a, **k):
        counts["put"] += 1
        return put(*a, **k)

    def counted_put_writes(*a, **k):
        counts["put_writes"] += 1
        return put_writes(*a, **k)

    saver.put, saver.put_writes = counted_put, counted_put_writes  # type: ignore[method-assign]
    return saver, counts


def check_pairing(hist: dict[str, list[str]], n: int, chatty: bool, human: bool) -> list[str]:
    """Problems in final histories: every call once, every message read exactly once."""
    problems = []
    for a in member_names(n):
        outs = [h for h in hist.get(a, []) if h.startswith(f"{a}.")]
        if [int(o.split(".")[1].split(":")[0]) for o in outs] != list(range(CALLS_PER_MEMBER)):
            problems.append(f"{a}: calls {outs}")
    if chatty:
        for (sender, k), receiver in SENDS.items():
            if int(receiver[1:]) >= n:
                continue
            tag = f"msg from {sender}.{k}"
            got = [h for h in hist.get(receiver, []) if h.startswith(tag)]
            if len(got) != 1:
                problems.append(f"{receiver} read {tag} {len(got)} times")
    if human:
        for a, _ in ASKS:
            if sum(h.startswith("person:") for h in hist.get(a, [])) != 1:
                problems.append(f"{a}: person's answer not read once")
    return problems


def next_call_problems(events: list[dict]) -> list[str]:
    """Each message must be read by the receiver's first call issued after it was sent.

    `events`: {"kind": "sent", "msg", "receiver", "next"} (the receiver's next call index
    when the message landed) and {"kind": "read", "msg", "receiver", "call"}.
    """
    sent = {e["msg"]: e for e in events if e["kind"] == "sent"}
    reads = [e for e in events if e["kind"] == "read"]
    problems = [f"{m} never read" for m in sent if m not in {e["msg"] for e in reads}]
    problems += [
        f"{e['msg']} re-sent after the crash with another text"
        for e in events
        if e["kind"] == "resent" and e["changed"]
    ]
    for e in reads:
        if e["msg"] in sent and e["call"] != sent[e["msg"]]["next"]:
            problems.append(
                f"{e['receiver']} read {e['msg']} at call {e['call']}, not at its next call {sent[e['msg']]['next']}"
            )
    return problems


def child(script: str, args: list[str], env: dict | None = None) -> subprocess.Popen:
    """Start `python script args` with stdout piped."""
    return subprocess.Popen(
        [sys.executable, script, *args], stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )


def last_json(text: str) -> dict:
    """The last line of `text` that is a JSON object."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no result line in: {text[-500:]}")


def run_scenario(
    script: str, members: int, workdir: Path, *, chatty: bool = False, kill_at_calls: int | None = None
) -> dict:
    """Uncrashed reference run, then (with `kill_at_calls`) a run killed with SIGKILL as
    soon as that many model calls have finished, resumed in a new process; compares the
    histories with the reference's."""
    flags = ["--members", str(members)] + (["--chatty"] if chatty else [])
    ref_db, ref_log = workdir / "ref.sqlite", workdir / "ref.calls"
    ref = child(script, flags + ["--db", str(ref_db), "--calllog", str(ref_log)])
    ref_out = last_json(ref.communicate()[0])
    # NOTE: a second uncrashed run tells whether the workload's interleaving is reproducible at all
    twin = child(script, flags + ["--db", str(workdir / "twin.sqlite")])
    twin_out = last_json(twin.communicate()[0])
    if kill_at_calls is None:
        return {"reference": ref_out, "uncrashed_runs_identical": twin_out["hist"] == ref_out["hist"]}
    db, log = workdir / "crash.sqlite", workdir / "crash.calls"
    proc = child(script, flags + ["--db", str(db), "--calllog", str(log)])
    while proc.poll() is None and (not log.exists() or log.read_text().count("\n") < kill_at_calls):
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    before = log.read_text().split("\n")[:-1] if log.exists() else []
    resumed = child(script, flags + ["--db", str(db), "--calllog", str(log), "--resume"])
    out = last_json(resumed.communicate()[0])
    after = log.read_text().split("\n")[:-1][len(before) :]
    again = sorted(set(before) & set(after))
    return {
        "kill_at_calls": kill_at_calls,
        "calls_before_kill": len(before),
        "calls_after_resume": len(after),
        "redone_completed": len(again),
        "redone_completed_calls": again,
        "histories_identical": out["hist"] == ref_out["hist"],
        "uncrashed_runs_identical": twin_out["hist"] == ref_out["hist"],
        "agents_differing": sorted(a for a in ref_out["hist"] if out["hist"].get(a) != ref_out["hist"][a]),
        "problems": check_pairing(out["hist"], members, chatty, False)
        + out["next_call_problems"]
        + ([] if out["prefix_ok"] else ["a checkpointed history was rewritten"]),
        "reference_problems": check_pairing(ref_out["hist"], members, chatty, False),
        "reference": {k: v for k, v in ref_out.items() if k != "hist"},
        "resumed": {k: v for k, v in out.items() if k != "hist"},
    }


def cli(mechanism: str, build: Callable[..., tuple[Any, dict]]) -> None:
    """Run one prototype from the command line; print one JSON line of results.

    Args:
        mechanism: The prototype's name (for the output).
        build: ``build(members, *, chatty, human, log, saver) -> (compiled graph, latency plan)``.
    """
    p = argparse.ArgumentParser()
    p.add_argument("--members", type=int, default=8)
    p.add_argument("--chatty", action="store_true")
    p.add_argument("--human", choices=["eager", "deferred"])
    p.add_argument("--stream", action="store_true")
    p.add_argument("--db")
    p.add_argument("--calllog")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--pause", type=float, default=0.3, help="seconds the person takes to answer")
    args = p.parse_args()
    db = args.db or tempfile.mktemp(suffix=".sqlite")
    saver, counts = counted_saver(db, fresh=not args.resume)
    log = CallLog(args.calllog)
    graph, plan = build(args.members, chatty=args.chatty, human=args.human, log=log, saver=saver)
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}, "recursion_limit": 100_000}
    result: dict[str, Any] = {
        "mechanism": mechanism,
        "members": args.members,
        "chatty": args.chatty,
        "human": args.human,
    }
    at_resume = graph.get_state(cfg).values.get("hist", {}) if args.resume else {}
    t0 = time.perf_counter()
    chunks: list[dict] = []
    boundaries = 0
    inp: Any = None if args.resume else {}
    pause = 0.0
    while True:
        if args.stream:
            for _ns, mode, data in graph.stream(
                inp, cfg, durability="sync", stream_mode=["messages", "updates"], subgraphs=True
            ):
                if mode == "updates" and not _ns and {"router", "scheduler"} & set(data):
                    boundaries += 1
                elif mode == "messages":
                    _, meta = data
                    chunks.append({"call": (meta.get("agent"), meta.get("k")), "boundary": boundaries})
            out = graph.get_state(cfg)
            pending = [i for t in out.tasks for i in t.interrupts]
        else:
            res = graph.invoke(inp, cfg, durability="sync")
            pending = res.get("__interrupt__", [])
        if not pending:
            break
        # NOTE: the person answers after `pause` s; calls in flight keep running in the pool meanwhile.
        before = log.count
        time.sleep(args.pause)
        pause += args.pause
        result["calls_finished_during_pause"] = log.count - before
        inp = Command(resume={a: HUMAN_ANSWER for a in pending[0].value})
    wall = time.perf_counter() - t0
    makespan = wall - pause
    state = graph.get_state(cfg).values
    crit = critical_path(plan)
    result.update(
        {
            "wall_s": wall,
            "makespan_s": makespan,
            "critical_s": crit,
            "ratio": makespan / crit,
            "lockstep_bound": lockstep_bound(plan) / crit,
            "calls_this_process": log.count,
            "supersteps": state.get("steps", 0),
            "puts": counts["put"],
            "put_writes": counts["put_writes"],
            "puts_per_call": counts["put"] / max(1, log.count),
            "problems": check_pairing(state["hist"], args.members, args.chatty, bool(args.human)),
            "next_call_problems": next_call_problems(state.get("events", [])),
            # nothing checkpointed before the crash is rewritten: old histories are prefixes
            "prefix_ok": all(state["hist"].get(a, [])[: len(h)] == h for a, h in at_resume.items()),
            "messages_read": sum(e["kind"] == "read" for e in state.get("events", [])),
            "hist": state["hist"],
            "nodes": sorted(graph.get_graph().nodes),
        }
    )
    if args.stream:
        spans: dict[tuple, set] = {}
        for c in chunks:
            spans.setdefault(c["call"], set()).add(c["boundary"])
        result["chunks"] = len(chunks)
        result["calls_streamed"] = len(spans)
        result["agents_tagged"] = sorted({a for a, _ in spans if a})
        # a call whose tokens arrived on both sides of a superstep boundary outlived a superstep
        result["calls_streaming_across_supersteps"] = sum(1 for b in spans.values() if len(b) > 1)
    print(json.dumps(result))
