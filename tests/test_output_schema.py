"""What a team run hands back: ``invoke``'s result and Studio's ``values`` chunks are a ``TeamOutput``.

The output schema is the user-facing conversation, the roster with statuses and the team
book; the per-agent ``histories``, ``requests`` and ``deliveries`` grow with every message,
so they stay in the state (``graph.get_state``, ``team.history``, ``team.state``) and out of
the chunks a ``values`` stream sends once per superstep. The API server (``langgraph dev``,
Studio) streams a graph's output keys; LangGraph's own ``stream`` defaults to every state
key, and streams the output keys with ``output_keys=graph.output_channels`` (tests/test_studio.py
checks Studio's stream end to end).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from scripting import act, call, reply_when_done

from teamgraph import Policy, ScriptedChatModel, Team

LEADER = "Team Leader"
MEMBER = "UI Operator_1"
OUTPUT = {"messages", "agents", "team"}
GROWING = {"histories", "requests", "deliveries"}


def _script(steps: int) -> dict[str, list]:
    """The leader delegates one task; the member takes ``steps`` tool steps of ~2 KB each, then answers."""
    return {
        LEADER: [
            act(call("create_sub_agent", role_id="ui-operator", task="Design the page.")),
            *reply_when_done("Page designed.", MEMBER, turns=40),
        ],
        MEMBER: [act(call("list_files"), content=f"step {i} " + "x" * 2000) for i in range(steps)] + ["Designed."],
    }


def _team(home: Path, script: dict, **policy: Any) -> tuple[Team, Any, dict]:
    team = Team(model=ScriptedChatModel(script), home=home, checkpointer=InMemorySaver(), policy=Policy(**policy))
    return team, team.compile(), {"configurable": {"thread_id": "out-1"}}


def _chunks(home: Path, steps: int) -> tuple[list[dict], dict]:
    """Every `values` chunk of one run, streamed as the API server streams them, and the state it ended in."""
    # NOTE: the member's calls are alike on purpose: loop detection must not stop it.
    _team_, graph, config = _team(home, _script(steps), loop_warn=50, loop_stop=50)
    chunks = list(
        graph.stream(
            {"messages": [("user", "Design it")]}, config, stream_mode="values", output_keys=graph.output_channels
        )
    )
    return chunks, graph.get_state(config).values


def _size(chunk: dict) -> int:
    return len(json.dumps(chunk, default=dumpd).encode())


def test_invoke_returns_the_conversation_the_roster_and_the_team_book(tmp_path: Path) -> None:
    team, graph, config = _team(tmp_path, _script(2))

    out = graph.invoke({"messages": [("user", "Design it")]}, config)

    assert set(out) == OUTPUT
    assert out["messages"][-1].content == "Page designed."
    assert out["agents"][MEMBER]["status"] == "idle"
    # The state is whole: histories, requests and deliveries are read from it.
    values = graph.get_state(config).values
    assert GROWING <= set(values)
    assert out["agents"] == values["agents"] and out["team"] == values["team"]
    history = team.history(config, MEMBER)
    assert [m.content[:6] for m in history if isinstance(m, AIMessage)] == ["step 0", "step 1", "Design"]
    assert len([m for m in history if isinstance(m, ToolMessage)]) == 2
    assert team.state(config)["histories"][MEMBER] == values["histories"][MEMBER]


def test_a_values_chunk_of_the_output_keys_carries_no_history_request_or_delivery(tmp_path: Path) -> None:
    chunks, values = _chunks(tmp_path, 3)

    assert len(chunks) > 3
    assert all(set(chunk) <= OUTPUT for chunk in chunks), [sorted(c) for c in chunks]
    last = chunks[-1]
    assert set(last) == OUTPUT
    assert (last["messages"], last["agents"], last["team"]) == (values["messages"], values["agents"], values["team"])


def test_values_chunks_do_not_grow_with_the_histories(tmp_path: Path) -> None:
    """Ten more 2 KB steps of a member leave a chunk's size as it was (the roster's counters only)."""
    short, short_state = _chunks(tmp_path / "short", 2)
    long, long_state = _chunks(tmp_path / "long", 12)

    grown = _size(long_state["histories"]) - _size(short_state["histories"])
    assert grown > 20_000  # the member's history did grow
    biggest = max(map(_size, short)), max(map(_size, long))
    assert biggest[1] - biggest[0] < 200, biggest


def test_a_python_stream_keeps_every_state_key_for_updates_and_values(tmp_path: Path) -> None:
    """`graph.stream` without `output_keys` is LangGraph's: every state key (the CLI's live view reads
    `histories` and `requests` from the router's updates)."""
    _team_, graph, config = _team(tmp_path, _script(1))

    parts = list(graph.stream({"messages": [("user", "Design it")]}, config, stream_mode=["updates", "values"]))

    values = [chunk for mode, chunk in parts if mode == "values"]
    assert GROWING | OUTPUT <= set(values[-1])
    assert values[-1]["histories"][MEMBER] == graph.get_state(config).values["histories"][MEMBER]
    stepped = {
        name for mode, chunk in parts if mode == "updates" for name in (chunk.get("router") or {}).get("histories", {})
    }
    assert {LEADER, MEMBER} <= stepped


def test_a_paused_run_returns_the_interrupt_and_its_requests_are_in_the_state(tmp_path: Path) -> None:
    script = {
        LEADER: [
            act(call("create_sub_agent", role_id="ui-operator", task="Design the page.")),
            *reply_when_done("Page designed.", MEMBER),
        ],
        MEMBER: [act(call("ask_master", question="Blue or green?")), "Designed in blue."],
    }
    team, graph, config = _team(tmp_path, script, ask="human")

    out = graph.invoke({"messages": [("user", "Design it")]}, config)

    assert set(out) == OUTPUT | {"__interrupt__"}
    (interrupt,) = out["__interrupt__"]
    assert list(interrupt.value["requests"]) == ["ask_1"]
    assert team.state(config)["requests"]["ask_1"]["status"] == "pending"

    out = graph.invoke(Command(resume={"ask_1": "Blue"}), config)

    assert set(out) == OUTPUT
    assert out["messages"][-1].content == "Page designed."
    assert team.state(config)["requests"]["ask_1"]["status"] == "answered"


def test_an_async_run_returns_the_output_schema_too(tmp_path: Path) -> None:
    _team_, graph, config = _team(tmp_path, _script(2))

    async def main() -> tuple[list[dict], dict]:
        stream = graph.astream(
            {"messages": [("user", "Design it")]}, config, stream_mode="values", output_keys=graph.output_channels
        )
        return [c async for c in stream], await graph.ainvoke(None, config)

    chunks, again = asyncio.run(main())

    assert chunks and all(set(chunk) <= OUTPUT for chunk in chunks)
    assert set(chunks[-1]) == OUTPUT
    assert again["messages"] == chunks[-1]["messages"]
