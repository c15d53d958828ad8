"""Long runs (issue 15): a member's prompt stays inside its window, however long it works.

- ``teamgraph-context``: the leader delegates once; the member then makes N tool
  calls (``fetch_page``, ~2 000-character results) before it answers. The team counts
  tokens with its default counter (LangChain's approximation) against
  ``Policy(context_tokens=20 000)``. A callback records the prompt tokens of every
  member call (same counter); the row gives the mean per 100 calls, the maximum, the
  number of compactions, and ``flat``: max / min of the per-100-call means after the
  first 100 calls (the first compaction happens inside them).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from bench.harness import db_bytes, peak_rss_mb
from bench.registry import Workload
from bench.scripted import filler

SYSTEM = "teamgraph"
LEADER = "Team Leader"
MEMBER = "Researcher_1"
WINDOW = 20_000
BUCKET = 100


@tool
def fetch_page(page: int) -> str:
    """Fetch one page of the corpus.

    Args:
        page: The page number.
    """
    return filler(f"page {page}", 2000)


class PromptMeter(BaseCallbackHandler):
    """Counts the prompt tokens of every model call of one agent (its turns and its summaries)."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.turns: list[int] = []
        self.summaries: list[int] = []

    def on_chat_model_start(self, serialized, messages, *, metadata=None, **kwargs):  # type: ignore[no-untyped-def]
        metadata = metadata or {}
        if metadata.get("teamgraph_agent") != self.agent:
            return
        tokens = count_tokens_approximately(messages[0])
        (self.summaries if metadata.get("teamgraph_call") == "compaction" else self.turns).append(tokens)


def context_workload(params: dict, workdir: Path) -> dict:
    """A member making N tool calls: prompt tokens per call, compactions, time."""
    from teamgraph import Policy, ScriptedChatModel, Team

    calls = int(params["calls"])
    script = {
        LEADER: [
            {
                "content": "",
                "tool_calls": [
                    {"name": "create_sub_agent", "args": {"role_id": "researcher", "task": f"Read pages 1 to {calls}."}}
                ],
            }
        ]
        + [""] * 4,
        MEMBER: [
            {"content": "", "tool_calls": [{"name": "fetch_page", "args": {"page": n}}]} for n in range(1, calls + 1)
        ]
        + [f"Read {calls} pages."],
    }
    policy = Policy(context_tokens=WINDOW, max_turn_steps=calls + 10, slice_steps=int(params.get("slice_steps", 1)))
    team = Team(model=ScriptedChatModel(script), home=workdir / "home", policy=policy, tools=[fetch_page])
    meter = PromptMeter(MEMBER)
    config = {"configurable": {"thread_id": "context"}, "callbacks": [meter]}
    cpu, start = time.process_time(), time.perf_counter()
    team.compile().invoke({"messages": [HumanMessage("Read the corpus")]}, config, durability="sync")
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    values = team.state(config)
    history = values["histories"][MEMBER]
    compactions = sum("teamgraph_compaction" in m.additional_kwargs for m in history)
    # NOTE: whole buckets only: the member's final answer is call N + 1.
    means = [statistics.fmean(meter.turns[i : i + BUCKET]) for i in range(0, len(meter.turns) - BUCKET + 1, BUCKET)]
    later = means[1:] or means
    return {
        "system": SYSTEM,
        "workload": f"context ({calls}-call member)",
        "calls": calls,
        "model_calls": len(meter.turns) + len(meter.summaries),
        "model_seconds": 0.0,
        "messages": sum(len(h) for h in values["histories"].values()),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "db_bytes": db_bytes(team.db_path),
        "peak_rss_mb": peak_rss_mb(),
        "window": WINDOW,
        "limit": int(WINDOW * policy.context_threshold),
        "prompt_tokens_per_100_calls": [round(m) for m in means],
        "prompt_tokens_max": max(meter.turns),
        "summary_prompt_tokens_max": max(meter.summaries, default=0),
        "compactions": compactions,
        "flat": max(later) / min(later),
    }


WORKLOADS: dict[str, Workload] = {
    "teamgraph-context": Workload(
        context_workload,
        full=[{"calls": 1000}],
        quick=[{"calls": 200}],
        timeout_s=900.0,
        description=context_workload.__doc__,
    ),
}
