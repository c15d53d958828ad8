"""Prototype (b): supersteps driven by completions (docs/scheduler.md).

One node, ``scheduler``, loops on itself. Model calls run in a process-wide thread pool
and outlive the superstep that issued them. Each superstep:

1. applies a person's answers (the ``human`` node wrote them) to the askers' inboxes;
2. re-issues every *recorded* dispatch that has no call in the pool (after a crash, or in
   a new process after an interrupt), with exactly the input that was recorded;
3. waits for the first completion, applies every finished call (history += what the call
   read + its answer; a message it sends lands in the receiver's inbox);
4. dispatches every runnable member: its input is its history + its whole inbox, and the
   dispatch record (call index + the inbox messages it read) is written in this same
   superstep, so the checkpoint that holds a completion also holds the dispatches it
   enabled (one checkpoint per finished call).

Run: ``python scheduler_completions.py --members 8 [--chatty] [--human eager|deferred]
[--stream] [--db PATH] [--calllog PATH] [--resume]``; prints one JSON line.
"""

from __future__ import annotations

import operator
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Annotated, Any, TypedDict

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from scheduler_common import ASKS, CALLS_PER_MEMBER, SENDS, CallLog, FakeModel, cli, latency_plan, member_names

POOL = ThreadPoolExecutor(max_workers=64)
FUTURES: dict[tuple[str, str, int], Future] = {}
"""(thread id, agent, call index) -> the call in flight in this process."""
LOCK = threading.Lock()


def merge(a: dict | None, b: dict) -> dict:
    return {**(a or {}), **b}


def append_lists(a: dict | None, b: dict) -> dict:
    out = dict(a or {})
    for key, items in b.items():
        out[key] = out.get(key, []) + items
    return out


class Team(TypedDict, total=False):
    hist: Annotated[dict, append_lists]    # agent -> history (strings)
    inbox: Annotated[dict, merge]          # agent -> unread messages (whole list per changed agent)
    calls: Annotated[dict, merge]          # agent -> finished calls
    inflight: Annotated[dict, merge]       # agent -> {"k", "read"} dispatch record, or None
    waiting: Annotated[dict, merge]        # agent -> question for a person, or None
    answers: Annotated[dict, merge]        # agent -> a person's answer (human node), or None
    events: Annotated[list, operator.add]  # sent/read records (the next-call check)
    steps: Annotated[int, operator.add]


def build(members: int, *, chatty: bool, human: str | None, log: CallLog, saver: Any):
    """Compile the completion-driven team graph."""
    plan = latency_plan(members)
    model = FakeModel(plan=plan, log=log)
    names = member_names(members)

    def submit(thread: str, agent: str, rec: dict, hist: list[str], config: RunnableConfig) -> None:
        # NOTE: the call runs with the issuing task's callbacks: stream_mode="messages"
        # sees its tokens even after that task's superstep has ended.
        cfg: RunnableConfig = {"callbacks": config.get("callbacks"),
                               "metadata": {**config.get("metadata", {}), "agent": agent, "k": rec["k"]}}
        prompt = [HumanMessage(x) for x in [*hist, *rec["read"]]] or [HumanMessage("start")]
        with LOCK:
            FUTURES[(thread, agent, rec["k"])] = POOL.submit(
                lambda: (agent, rec, model.invoke(prompt, cfg, agent=agent, k=rec["k"]).content))

    def scheduler(state: Team, config: RunnableConfig) -> dict:
        thread = config["configurable"]["thread_id"]
        hist = state.get("hist", {})
        inbox = {a: list(state.get("inbox", {}).get(a, [])) for a in names}
        calls = {a: state.get("calls", {}).get(a, 0) for a in names}
        inflight = {a: state.get("inflight", {}).get(a) for a in names}
        waiting = {a: state.get("waiting", {}).get(a) for a in names}
        upd: dict[str, Any] = {"hist": {}, "inbox": {}, "calls": {}, "inflight": {}, "waiting": {},
                               "answers": {}, "events": [], "steps": 1}
        for a, answer in state.get("answers", {}).items():
            if answer is not None:
                inbox[a].append(f"person: {answer}")
                waiting[a] = upd["waiting"][a] = None
                upd["answers"][a] = None
                upd["inbox"][a] = inbox[a]
        for a, rec in inflight.items():
            if rec is not None and (thread, a, rec["k"]) not in FUTURES:
                submit(thread, a, rec, hist.get(a, []), config)   # re-issue the recorded input
        with LOCK:
            mine = {key: f for key, f in FUTURES.items() if key[0] == thread}
        if mine:
            wait(list(mine.values()), return_when=FIRST_COMPLETED)
            for key in sorted(k for k, f in mine.items() if f.done()):
                agent, rec, out = FUTURES.pop(key).result()
                apply(agent, rec, out, inbox, calls, inflight, waiting, upd)
        for a in names:
            if calls[a] < CALLS_PER_MEMBER and inflight[a] is None and not waiting[a]:
                rec = {"k": calls[a], "read": inbox[a]}
                upd["events"] += [{"kind": "read", "msg": m.split(":")[0], "receiver": a, "call": calls[a]}
                                  for m in inbox[a] if m.startswith("msg from")]
                inbox[a] = upd["inbox"][a] = []
                inflight[a] = upd["inflight"][a] = rec
                submit(thread, a, rec, [*hist.get(a, []), *upd["hist"].get(a, [])], config)
        return upd

    def apply(agent, rec, out, inbox, calls, inflight, waiting, upd) -> None:
        k = rec["k"]
        upd["hist"][agent] = upd["hist"].get(agent, []) + [*rec["read"], out]
        calls[agent] = upd["calls"][agent] = k + 1
        inflight[agent] = upd["inflight"][agent] = None
        if chatty and (agent, k) in SENDS and SENDS[(agent, k)] in inbox:
            to = SENDS[(agent, k)]
            tag = f"msg from {agent}.{k}"
            inbox[to].append(f"{tag}: {out}")
            upd["inbox"][to] = inbox[to]
            nxt = inflight[to]["k"] + 1 if inflight[to] else calls[to]
            upd["events"].append({"kind": "sent", "msg": tag, "receiver": to, "next": nxt})
        if human and (agent, k) in ASKS:
            waiting[agent] = upd["waiting"][agent] = f"{agent} asks: which colour?"

    def human_gate(state: Team) -> dict:
        answers = state.get("answers", {})
        open_ = {a: q for a, q in state.get("waiting", {}).items() if q and not answers.get(a)}
        if not open_:
            return {}
        return {"answers": interrupt(open_)}

    def route(state: Team) -> list[str] | str:
        inflight = any(state.get("inflight", {}).values())
        waiting = {a for a, q in state.get("waiting", {}).items() if q}
        runnable = any(state.get("calls", {}).get(a, 0) < CALLS_PER_MEMBER and a not in waiting for a in names)
        busy = inflight or runnable
        targets = ["scheduler"] if busy else []
        unanswered = waiting - {a for a, v in state.get("answers", {}).items() if v}
        if unanswered and (human == "eager" or not busy):
            targets.append("human")
        return targets or END

    g = StateGraph(Team)
    g.add_node("scheduler", scheduler)
    g.add_node("human", human_gate)
    g.add_edge(START, "scheduler")
    g.add_conditional_edges("scheduler", route, ["scheduler", "human", END])
    g.add_edge("human", "scheduler")
    return g.compile(checkpointer=saver), plan


if __name__ == "__main__":
    cli("completions", build)
