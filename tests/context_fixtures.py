"""Helpers for the long-run tests (tests/test_compaction*.py): a fake token counter,
a tool with large results, a recorder of model calls, and a reading member's team."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from scripting import act, call, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.models.calls import COMPACTION_KEY

LEADER = "Team Leader"
R1 = "Researcher_1"
WINDOW = 20_000
PAGE = "lorem ipsum dolor sit amet " * 150  # about 4 000 characters: 1 000 tokens for `count`


def count(messages) -> int:
    """The fake token counter: 4 characters a token, tool calls included."""
    return sum(len(str(m.content)) + len(json.dumps(getattr(m, "tool_calls", []))) for m in messages) // 4


@tool
def fetch_page(page: int) -> str:
    """Fetch one page of the corpus.

    Args:
        page: The page number.
    """
    # NOTE: every 100th page is huge (40 000 tokens): more than the whole window.
    return f"page {page}\n" + PAGE * (40 if page % 100 == 0 else 1)


class Calls(BaseCallbackHandler):
    """Every chat model call: who made it, what for, and the messages sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, list]] = []

    def on_chat_model_start(self, serialized, messages, *, metadata=None, **kwargs):
        metadata = metadata or {}
        self.calls.append((metadata.get("teamgraph_agent"), metadata.get("teamgraph_call"), list(messages[0])))

    def of(self, agent: str, kind: str | None = None) -> list[list]:
        return [messages for who, what, messages in self.calls if who == agent and what == kind]


def markers(values: dict, name: str) -> list[AIMessage]:
    return [m for m in values["histories"][name] if COMPACTION_KEY in m.additional_kwargs]


def assert_pairing(messages: list) -> None:
    """Each AI message's tool calls are answered right after it, and no result lacks its call."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"result {message.tool_call_id} without its call in the view"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"calls {open_calls} not answered before {type(message).__name__}"
        if isinstance(message, AIMessage):
            open_calls = {c["id"] for c in message.tool_calls}


def reader_script(pages: int) -> dict:
    return {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task=f"Read pages 1 to {pages}.")), *quiet(4)],
        R1: [act(call("fetch_page", page=n)) for n in range(1, pages + 1)] + [f"Read {pages} pages."],
    }


def reader_team(home: Path, script: dict, **policy) -> Team:
    policy = {"context_tokens": WINDOW, "max_turn_steps": 2000, "slice_steps": 50, **policy}
    return Team(
        model=ScriptedChatModel(script), home=home, policy=Policy(**policy), tools=[fetch_page], token_counter=count
    )
