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
from scheduler_common import ASKS, CALLS_PER_MEMBER, SENDS, CallLog, Prototype, append_lists, cli, merge


class Team(TypedDict, total=False):
    hist: Annotated[dict, append_lists]
    calls: Annotated[dict, merge]
    events: Annotated[list, operator.add]
    steps: Annotated[int, operator.add]


class Member(TypedDict, total=False):
    agent: str
    k: int
    new: Annotated[list, operator.add]  # the member's history (this run)
    read: Annotated[list, operator.add]  # mailbox keys already read
    events: Annotated[list, operator.add]
    stop: str


def open_store(saver: Any) -> SqliteStore:
    """A SqliteStore next to the checkpoint file (a fresh one when the thread is new)."""
    db = saver.conn.execute("PRAGMA database_list").fetchone()[2]
    if not saver.conn.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone():
        for suffix in (".store", ".store-wal", ".store-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
    store = SqliteStore(sqlite3.connect(db + ".store", check_same_thread=False, isolation_level=None))
    store.setup()
    return store


class MemberRuns(Prototype):
    """The member subgraph (its whole loop) and the mailbox of prototype (c)."""

    def __init__(self, members: int, *, chatty: bool, human: str | None, log: CallLog) -> None:
        super().__init__(members, chatty=chatty, human=human, log=log)
        self.started: dict[str, int] = {}  # measurement only: each member's next call to read its mailbox
        sb = StateGraph(Member)
        sb.add_node("call", self.call)
        sb.add_node("ask", self.ask)
        sb.add_edge(START, "call")
        sb.add_conditional_edges("call", self.after, ["call", "ask", END])
        sb.add_edge("ask", "call")
        self.member_graph = sb.compile()

    def call(self, state: Member, config: RunnableConfig, *, store: BaseStore) -> dict:
        """Read every unread mailbox key, make one call, maybe send a message or ask a person."""
        a, k = state["agent"], state["k"]
        mail = [i for i in store.search(("mail", a), limit=1000) if i.key not in state.get("read", [])]
        mail.sort(key=lambda i: (i.created_at, i.key))
        read = [i.value["text"] for i in mail]
        self.started[a] = k + 1
        cfg: RunnableConfig = {**config, "metadata": {**config.get("metadata", {}), "agent": a, "k": k}}
        prompt = [HumanMessage(x) for x in state.get("new", []) + read] or [HumanMessage("start")]
        out = str(self.model.invoke(prompt, cfg, agent=a, k=k).content)
        upd: dict[str, Any] = {
            "new": [*read, out],
            "k": k + 1,
            "read": [i.key for i in mail],
            "events": [{"kind": "read", "msg": i.value["text"].split(":")[0], "receiver": a, "call": k} for i in mail],
        }
        if self.chatty and SENDS.get((a, k)) in self.names:
            upd["events"].append(self.send(store, a, k, SENDS[(a, k)], out))
        if self.human and (a, k) in ASKS:
            upd["stop"] = "ask"
        return upd

    def send(self, store: BaseStore, a: str, k: int, to: str, out: str) -> dict:
        """Put the message into the receiver's mailbox; the event says whether it is a re-send."""
        # NOTE: the store write is outside the checkpoint: a key per (sender, call) makes a re-issue idempotent
        text = f"msg from {a}.{k}: {out}"
        before = store.get(("mail", to), f"{a}.{k}")
        store.put(("mail", to), f"{a}.{k}", {"text": text})
        if before is None:
            return {"kind": "sent", "msg": f"msg from {a}.{k}", "receiver": to, "next": self.started.get(to, 0)}
        # a call re-issued after a crash: is the message the receiver may have read the same?
        return {"kind": "resent", "msg": f"msg from {a}.{k}", "receiver": to, "changed": before.value["text"] != text}

    def ask(self, state: Member) -> dict:
        """A person's question: an interrupt inside the member's run."""
        answer = interrupt({state["agent"]: f"{state['agent']} asks: which colour?"})
        return {"new": [f"person: {answer[state['agent']]}"], "stop": ""}

    def after(self, state: Member) -> str:
        if state.get("stop") == "ask":
            return "ask"
        return END if state["k"] >= CALLS_PER_MEMBER else "call"

    def member(self, payload: dict, config: RunnableConfig) -> dict:
        """A member's whole run (the Send task)."""
        a = payload["agent"]
        out = self.member_graph.invoke({"agent": a, "k": 0}, config)
        return {"hist": {a: out["new"]}, "calls": {a: out["k"]}, "events": out.get("events", [])}

    def route(self, state: Team) -> list[Send] | str:
        todo = [Send("member", {"agent": a}) for a in self.names if state.get("calls", {}).get(a, 0) < CALLS_PER_MEMBER]
        return todo or END


def build(members: int, *, chatty: bool, human: str | None, log: CallLog, saver: Any):
    """Compile the per-member-runs team graph (the store lives next to the checkpoints)."""
    team = MemberRuns(members, chatty=chatty, human=human, log=log)
    g = StateGraph(Team)
    g.add_node("router", lambda state: {"steps": 1})
    g.add_node("member", team.member)
    g.add_edge(START, "router")
    g.add_conditional_edges("router", team.route, ["member", END])
    g.add_edge("member", "router")
    return g.compile(checkpointer=saver, store=open_store(saver)).with_config(max_concurrency=members + 2), team.plan


if __name__ == "__main__":
    cli("members", build)
