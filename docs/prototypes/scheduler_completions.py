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
from scheduler_common import ASKS, CALLS_PER_MEMBER, SENDS, CallLog, Prototype, append_lists, cli, merge

POOL = ThreadPoolExecutor(max_workers=64)
FUTURES: dict[tuple[str, str, int], Future] = {}
"""(thread id, agent, call index) -> the call in flight in this process."""
LOCK = threading.Lock()


class Team(TypedDict, total=False):
    hist: Annotated[dict, append_lists]  # agent -> history (strings)
    inbox: Annotated[dict, merge]  # agent -> unread messages (whole list per changed agent)
    calls: Annotated[dict, merge]  # agent -> finished calls
    inflight: Annotated[dict, merge]  # agent -> {"k", "read"} dispatch record, or None
    waiting: Annotated[dict, merge]  # agent -> question for a person, or None
    answers: Annotated[dict, merge]  # agent -> a person's answer (human node), or None
    events: Annotated[list, operator.add]  # sent/read records (the next-call check)
    steps: Annotated[int, operator.add]


class Pass:
    """One superstep's working copy of the state, and the update it will write."""

    def __init__(self, state: Team, names: list[str]) -> None:
        self.hist = state.get("hist", {})
        self.inbox = {a: list(state.get("inbox", {}).get(a, [])) for a in names}
        self.calls = {a: state.get("calls", {}).get(a, 0) for a in names}
        self.inflight = {a: state.get("inflight", {}).get(a) for a in names}
        self.waiting = {a: state.get("waiting", {}).get(a) for a in names}
        self.upd: dict[str, Any] = {
            "hist": {},
            "inbox": {},
            "calls": {},
            "inflight": {},
            "waiting": {},
            "answers": {},
            "events": [],
            "steps": 1,
        }

    def set(self, channel: str, agent: str, value: Any) -> None:
        """Change one agent's entry here and in the update."""
        getattr(self, channel)[agent] = self.upd[channel][agent] = value

    def answer(self, agent: str, text: str) -> None:
        """A person's answer: into the asker's inbox; the asker is no longer waiting."""
        self.inbox[agent].append(f"person: {text}")
        self.set("inbox", agent, self.inbox[agent])
        self.set("waiting", agent, None)
        self.upd["answers"][agent] = None

    def dispatch(self, agent: str) -> dict:
        """Record the agent's next call: its index and the inbox it reads (all of it)."""
        k, read = self.calls[agent], self.inbox[agent]
        self.upd["events"] += [
            {"kind": "read", "msg": m.split(":")[0], "receiver": agent, "call": k}
            for m in read
            if m.startswith("msg from")
        ]
        self.set("inbox", agent, [])
        rec = {"k": k, "read": read}
        self.set("inflight", agent, rec)
        return rec


class Completions(Prototype):
    """The scheduler node, the human gate and the route of prototype (b)."""

    def submit(self, thread: str, agent: str, rec: dict, hist: list[str], config: RunnableConfig) -> None:
        """Run the call in the pool, keyed (thread, agent, call index)."""
        # NOTE: the call runs with the issuing task's callbacks: stream_mode="messages"
        # sees its tokens even after that task's superstep has ended.
        cfg: RunnableConfig = {
            "callbacks": config.get("callbacks"),
            "metadata": {**config.get("metadata", {}), "agent": agent, "k": rec["k"]},
        }
        prompt = [HumanMessage(x) for x in [*hist, *rec["read"]]] or [HumanMessage("start")]
        with LOCK:
            FUTURES[(thread, agent, rec["k"])] = POOL.submit(
                lambda: (agent, rec, self.model.invoke(prompt, cfg, agent=agent, k=rec["k"]).content)
            )

    def scheduler(self, state: Team, config: RunnableConfig) -> dict:
        """One superstep: answers, re-issues, the first completions, new dispatches."""
        thread = config["configurable"]["thread_id"]
        now = Pass(state, self.names)
        for a, answer in state.get("answers", {}).items():
            if answer is not None:
                now.answer(a, answer)
        for a, rec in now.inflight.items():
            if rec is not None and (thread, a, rec["k"]) not in FUTURES:
                self.submit(thread, a, rec, now.hist.get(a, []), config)  # re-issue the recorded input
        with LOCK:
            mine = {key: f for key, f in FUTURES.items() if key[0] == thread}
        if mine:
            wait(list(mine.values()), return_when=FIRST_COMPLETED)
            for key in sorted(k for k, f in mine.items() if f.done()):
                self.apply(now, *FUTURES.pop(key).result())
        for a in self.names:
            if now.calls[a] < CALLS_PER_MEMBER and now.inflight[a] is None and not now.waiting[a]:
                self.submit(thread, a, now.dispatch(a), [*now.hist.get(a, []), *now.upd["hist"].get(a, [])], config)
        return now.upd

    def apply(self, now: Pass, agent: str, rec: dict, out: str) -> None:
        """A finished call: history += what it read + its answer; its message; its question."""
        k = rec["k"]
        now.upd["hist"][agent] = now.upd["hist"].get(agent, []) + [*rec["read"], out]
        now.set("calls", agent, k + 1)
        now.set("inflight", agent, None)
        to = SENDS.get((agent, k)) if self.chatty else None
        if to in now.inbox:
            tag = f"msg from {agent}.{k}"
            now.set("inbox", to, [*now.inbox[to], f"{tag}: {out}"])
            nxt = now.inflight[to]["k"] + 1 if now.inflight[to] else now.calls[to]
            now.upd["events"].append({"kind": "sent", "msg": tag, "receiver": to, "next": nxt})
        if self.human and (agent, k) in ASKS:
            now.set("waiting", agent, f"{agent} asks: which colour?")

    def human_gate(self, state: Team) -> dict:
        """One interrupt for every open question (LangGraph pauses the whole run)."""
        answers = state.get("answers", {})
        open_ = {a: q for a, q in state.get("waiting", {}).items() if q and not answers.get(a)}
        if not open_:
            return {}
        return {"answers": interrupt(open_)}

    def route(self, state: Team) -> list[str] | str:
        """scheduler while anything runs; human when asked (eager) or when nothing else can run."""
        inflight = any(state.get("inflight", {}).values())
        waiting = {a for a, q in state.get("waiting", {}).items() if q}
        runnable = any(state.get("calls", {}).get(a, 0) < CALLS_PER_MEMBER and a not in waiting for a in self.names)
        busy = inflight or runnable
        targets = ["scheduler"] if busy else []
        unanswered = waiting - {a for a, v in state.get("answers", {}).items() if v}
        if unanswered and (self.human == "eager" or not busy):
            targets.append("human")
        return targets or END


def build(members: int, *, chatty: bool, human: str | None, log: CallLog, saver: Any):
    """Compile the completion-driven team graph; (graph, latency plan)."""
    team = Completions(members, chatty=chatty, human=human, log=log)
    g = StateGraph(Team)
    g.add_node("scheduler", team.scheduler)
    g.add_node("human", team.human_gate)
    g.add_edge(START, "scheduler")
    g.add_conditional_edges("scheduler", team.route, ["scheduler", "human", END])
    g.add_edge("human", "scheduler")
    return g.compile(checkpointer=saver), team.plan


if __name__ == "__main__":
    cli("completions", build)
