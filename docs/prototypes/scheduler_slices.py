"""Prototype (a): durable slices with a yield flag (docs/scheduler.md).

``router`` sends one task per runnable member; the task runs the member's model loop as a
subgraph that inherits the parent's checkpointer (one subgraph checkpoint per model call,
in the task's own namespace). A slice ends when the member's calls run out, when its call
sends a message or asks a person (an effect for the router), or at its next call boundary
once any task of the superstep has raised the yield flag. The router then delivers: a
member reads its whole inbox at the start of its next slice.

A person's question is an ``interrupt()`` inside the asker's subgraph (``ask`` node);
the other tasks of the superstep run until they yield, then the run pauses.

Run: ``python scheduler_slices.py --members 8 [--chatty] [--human eager] [--stream]
[--db PATH] [--calllog PATH] [--resume]``; prints one JSON line.
"""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any, TypedDict

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt
from scheduler_common import ASKS, CALLS_PER_MEMBER, SENDS, CallLog, Prototype, append_lists, cli, merge

FLAGS: dict[tuple[str, int], threading.Event] = {}
"""(thread id, superstep) -> the yield flag of that superstep (process memory only)."""


class Team(TypedDict, total=False):
    hist: Annotated[dict, append_lists]  # agent -> history
    mail: Annotated[dict, append_lists]  # agent -> every message ever sent to it
    read: Annotated[dict, merge]  # agent -> how many of its messages it has read
    seen: Annotated[dict, merge]  # agent -> how many of its messages the router has seen
    calls: Annotated[dict, merge]  # agent -> finished calls
    waiting: Annotated[dict, merge]  # agent -> question, or None
    events: Annotated[list, operator.add]
    steps: Annotated[int, operator.add]


class Slice(TypedDict, total=False):
    agent: str
    k: int  # next call index
    step: int  # the parent superstep (its yield flag)
    prompt: list  # history + what this slice read
    new: Annotated[list, operator.add]  # messages this slice adds to the history
    sent: Annotated[list, operator.add]  # (receiver, message) pairs
    stop: str


def flag(config: RunnableConfig, step: int) -> threading.Event:
    """The yield flag of the parent superstep `step` of this thread."""
    return FLAGS.setdefault((config["configurable"]["thread_id"], step), threading.Event())


def mail_by_receiver(sent: list) -> dict[str, list[str]]:
    """[(receiver, text), ...] -> {receiver: [text, ...]}."""
    out: dict[str, list[str]] = {}
    for to, text in sent:
        out.setdefault(to, []).append(text)
    return out


class Slices(Prototype):
    """The member subgraph, the member task, the router and the route of prototype (a)."""

    def __init__(self, members: int, *, chatty: bool, human: str | None, log: CallLog) -> None:
        super().__init__(members, chatty=chatty, human=human, log=log)
        sb = StateGraph(Slice)
        sb.add_node("call", self.call)
        sb.add_node("ask", self.ask)
        sb.add_edge(START, "call")
        sb.add_conditional_edges("call", self.after, ["call", "ask", END])
        sb.add_edge("ask", END)
        self.member_graph = sb.compile()  # inherits the parent's checkpointer: durable per call

    def call(self, state: Slice, config: RunnableConfig) -> dict:
        """One model call; a message or a question ends the slice and raises the yield flag."""
        a, k = state["agent"], state["k"]
        cfg: RunnableConfig = {**config, "metadata": {**config.get("metadata", {}), "agent": a, "k": k}}
        prompt = [HumanMessage(x) for x in state["prompt"] + state.get("new", [])] or [HumanMessage("start")]
        out = str(self.model.invoke(prompt, cfg, agent=a, k=k).content)
        upd: dict[str, Any] = {"new": [out], "k": k + 1}
        if self.chatty and SENDS.get((a, k)) in self.names:
            upd["sent"] = [(SENDS[(a, k)], f"msg from {a}.{k}: {out}")]
            upd["stop"] = "send"
            flag(config, state["step"]).set()  # NOTE: everyone yields so the router can deliver
        if self.human and (a, k) in ASKS:
            upd["stop"] = "ask"
            flag(config, state["step"]).set()
        return upd

    def ask(self, state: Slice) -> dict:
        """A person's question: an interrupt inside the member's subgraph."""
        answer = interrupt({state["agent"]: f"{state['agent']} asks: which colour?"})
        return {"new": [f"person: {answer[state['agent']]}"], "stop": ""}

    def after(self, state: Slice, config: RunnableConfig) -> str:
        """Next call, the question, or the end of the slice (calls out, effect, yield flag)."""
        if state.get("stop") == "ask":
            return "ask"
        if state["k"] >= CALLS_PER_MEMBER or state.get("stop") or flag(config, state["step"]).is_set():
            return END
        return "call"

    def member(self, payload: dict, config: RunnableConfig) -> dict:
        """A member's slice (the Send task): run the subgraph, return its writes."""
        a, k0, read = payload["agent"], payload["k"], payload["read"]
        out = self.member_graph.invoke(
            {"agent": a, "k": k0, "step": payload["step"], "prompt": payload["hist"] + read, "new": []}, config
        )
        upd: dict[str, Any] = {
            "hist": {a: read + out["new"]},
            "calls": {a: out["k"]},
            "read": {a: payload["read_upto"]},
            "events": [
                {"kind": "read", "msg": m.split(":")[0], "receiver": a, "call": k0}
                for m in read
                if m.startswith("msg from")
            ],
        }
        if out["sent"]:
            upd["mail"] = mail_by_receiver(out["sent"])
        return upd

    def router(self, state: Team) -> dict:
        """The router's pass: record when each new message landed (the receiver's next call)."""
        seen, events = {}, []
        for a, msgs in state.get("mail", {}).items():
            for m in msgs[state.get("seen", {}).get(a, 0) :]:
                events.append(
                    {"kind": "sent", "msg": m.split(":")[0], "receiver": a, "next": state.get("calls", {}).get(a, 0)}
                )
            seen[a] = len(msgs)
        return {"seen": seen, "events": events, "steps": 1}

    def route(self, state: Team) -> list[Send] | str:
        """One slice per member with calls left; it reads all of its unread mail."""
        sends = []
        for a in self.names:
            k = state.get("calls", {}).get(a, 0)
            if k >= CALLS_PER_MEMBER:
                continue
            mail, upto = state.get("mail", {}).get(a, []), state.get("read", {}).get(a, 0)
            sends.append(
                Send(
                    "member",
                    {
                        "agent": a,
                        "k": k,
                        "step": state.get("steps", 0),
                        "hist": state.get("hist", {}).get(a, []),
                        "read": mail[upto:],
                        "read_upto": len(mail),
                    },
                )
            )
        return sends or END


def build(members: int, *, chatty: bool, human: str | None, log: CallLog, saver: Any):
    """Compile the slices team graph; (graph, latency plan)."""
    team = Slices(members, chatty=chatty, human=human, log=log)
    g = StateGraph(Team)
    g.add_node("router", team.router)
    g.add_node("member", team.member)
    g.add_edge(START, "router")
    g.add_conditional_edges("router", team.route, ["member", END])
    g.add_edge("member", "router")
    return g.compile(checkpointer=saver).with_config(max_concurrency=members + 2), team.plan


if __name__ == "__main__":
    cli("slices", build)
