"""Prototype (c): per-member durable subgraph runs plus a mailbox in the store (docs/scheduler.md).

``router`` sends one task per member; the task runs the member's whole loop as a subgraph
that inherits the parent's checkpointer (its own checkpoint namespace, one checkpoint per
model call). Messages between members do not go through the router: a sender puts them
into a ``SqliteStore`` (namespace ``("mail", receiver)``, key ``sender.k``, so a call
re-issued after a crash overwrites instead of duplicating) and the receiver reads every
key it has not read yet before each call; its read keys are in its own checkpointed state.
A person's question is an ``interrupt()`` in the asker's subgraph.

Run: ``python scheduler_members.py --members 8 [--chatty] [--human eager] [--stream]
[--db PATH] [--calllog PATH] [--resume]``; prints one JSON line.
"""

from __future__ import annotations

import operator
import os
import sqlite3
from typing import Annotated, Any, TypedDict

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore
from langgraph.types import Send, interrupt
from scheduler_common import ASKS, CALLS_PER_MEMBER, SENDS, CallLog, FakeModel, cli, latency_plan, member_names


def merge(a: dict | None, b: dict) -> dict:
    return {**(a or {}), **b}


def append_lists(a: dict | None, b: dict) -> dict:
    out = dict(a or {})
    for key, items in b.items():
        out[key] = out.get(key, []) + items
    return out


class Team(TypedDict, total=False):
    hist: Annotated[dict, append_lists]
    calls: Annotated[dict, merge]
    events: Annotated[list, operator.add]
    steps: Annotated[int, operator.add]


class Member(TypedDict, total=False):
    agent: str
    k: int
    new: Annotated[list, operator.add]      # the member's history (this run)
    read: Annotated[list, operator.add]     # mailbox keys already read
    events: Annotated[list, operator.add]
    stop: str


def build(members: int, *, chatty: bool, human: str | None, log: CallLog, saver: Any):
    """Compile the per-member-runs team graph (the store lives next to the checkpoints)."""
    plan = latency_plan(members)
    model = FakeModel(plan=plan, log=log)
    names = member_names(members)
    db = saver.conn.execute("PRAGMA database_list").fetchone()[2]
    started: dict[str, int] = {}   # measurement only: each member's next call to read its mailbox
    if not saver.conn.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone():
        for suffix in (".store", ".store-wal", ".store-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
    store = SqliteStore(sqlite3.connect(db + ".store", check_same_thread=False, isolation_level=None))
    store.setup()

    def call(state: Member, config: RunnableConfig, *, store: BaseStore) -> dict:
        a, k = state["agent"], state["k"]
        mail = [i for i in store.search(("mail", a), limit=1000) if i.key not in state.get("read", [])]
        mail.sort(key=lambda i: (i.created_at, i.key))
        read = [i.value["text"] for i in mail]
        started[a] = k + 1
        cfg: RunnableConfig = {**config, "metadata": {**config.get("metadata", {}), "agent": a, "k": k}}
        prompt = [HumanMessage(x) for x in state.get("new", []) + read] or [HumanMessage("start")]
        out = str(model.invoke(prompt, cfg, agent=a, k=k).content)
        upd: dict[str, Any] = {"new": [*read, out], "k": k + 1, "read": [i.key for i in mail],
                               "events": [{"kind": "read", "msg": i.value["text"].split(":")[0], "receiver": a,
                                           "call": k} for i in mail]}
        if chatty and (a, k) in SENDS and SENDS[(a, k)] in names:
            to = SENDS[(a, k)]
            # NOTE: the store write is outside the checkpoint: a key per (sender, call) makes a re-issue idempotent
            text = f"msg from {a}.{k}: {out}"
            before = store.get(("mail", to), f"{a}.{k}")
            store.put(("mail", to), f"{a}.{k}", {"text": text})
            if before is None:
                upd["events"].append({"kind": "sent", "msg": f"msg from {a}.{k}", "receiver": to,
                                      "next": started.get(to, 0)})
            else:   # a call re-issued after a crash: was the message the receiver may have read the same?
                upd["events"].append({"kind": "resent", "msg": f"msg from {a}.{k}", "receiver": to,
                                      "changed": before.value["text"] != text})
        if human and (a, k) in ASKS:
            upd["stop"] = "ask"
        return upd

    def ask(state: Member) -> dict:
        answer = interrupt({state["agent"]: f"{state['agent']} asks: which colour?"})
        return {"new": [f"person: {answer[state['agent']]}"], "stop": ""}

    def after(state: Member) -> str:
        if state.get("stop") == "ask":
            return "ask"
        return END if state["k"] >= CALLS_PER_MEMBER else "call"

    sb = StateGraph(Member)
    sb.add_node("call", call)
    sb.add_node("ask", ask)
    sb.add_edge(START, "call")
    sb.add_conditional_edges("call", after, ["call", "ask", END])
    sb.add_edge("ask", "call")
    member_graph = sb.compile()

    def member(payload: dict, config: RunnableConfig) -> dict:
        a = payload["agent"]
        out = member_graph.invoke({"agent": a, "k": 0}, config)
        return {"hist": {a: out["new"]}, "calls": {a: out["k"]}, "events": out.get("events", [])}

    def router(state: Team) -> dict:
        return {"steps": 1}

    def route(state: Team) -> list[Send] | str:
        todo = [Send("member", {"agent": a}) for a in names if state.get("calls", {}).get(a, 0) < CALLS_PER_MEMBER]
        return todo or END

    g = StateGraph(Team)
    g.add_node("router", router)
    g.add_node("member", member)
    g.add_edge(START, "router")
    g.add_conditional_edges("router", route, ["member", END])
    g.add_edge("member", "router")
    return g.compile(checkpointer=saver, store=store).with_config(max_concurrency=members + 2), plan


if __name__ == "__main__":
    cli("members", build)
