"""Issue 30, point 4: idempotent tools. A step re-run after a crash takes what the first run recorded.

A member "charges a card" (a tool that appends a line to a file per run) in its step; the
process stops (``Crash``, a BaseException no handler of ours catches) at a chosen point
of that step's node, before the checkpoint after it. A second ``Team`` on the same home and
database (a new process would do the same) resumes the thread:

- stopped after the tool's result was recorded (``crash="effects"``: the node's last part
  fails): the card is charged once, the history
  holds one result, the model call that made the tool call is not made again;
- stopped while the tool ran: the tool runs again with the same idempotency key and
  ``attempt`` 2, and its result carries ``RERUN_KEY``.

Both schedulers, on SQLite and on PostgreSQL. ``test_a_killed_process`` does it with a
process that really dies (``os._exit``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore
from pg_fixtures import postgres_server, postgres_url  # noqa: F401
from scripting import act, call

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.graph import scheduler
from teamgraph.nodes import role_graph
from teamgraph.nodes.journal import JOURNAL_NAMESPACE, RERUN_KEY, flush, run_namespace
from teamgraph.tools import ToolContext

LEADER = "Team Leader"
MEMBER = "Researcher_1"
THREAD = "card"
CONFIG = {"configurable": {"thread_id": THREAD}}


class Crash(BaseException):
    """The process stops here (as ``os._exit`` would, but the test goes on)."""


class Card:
    """The card a tool charges: one line per charge in a file, and where the process stops."""

    def __init__(self, folder: Path, *, crash: str) -> None:
        self.ledger = folder / "charges.jsonl"
        self.crash = crash
        self.calls: list[str] = []
        self.crashed = False

    def charges(self) -> list[dict[str, Any]]:
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    def stop(self, where: str) -> None:
        if self.crash == where and not self.crashed:
            self.crashed = True
            raise Crash(where)

    def tool(self) -> Any:
        card = self

        @tool
        def charge_card(amount: int, context: ToolContext) -> str:
            """Charge the customer's card."""
            with card.ledger.open("a") as out:
                out.write(json.dumps({"key": context.idempotency_key, "attempt": context.attempt}) + "\n")
            card.stop("tool")  # NOTE: the charge happened; the process dies before the tool returns
            return f"charged {amount}"

        return charge_card

    def script(self) -> dict[str, list[Any]]:
        def counted(name: str, turn: Callable[[list], Any]) -> Callable[[list], Any]:
            def play(messages: list) -> Any:
                self.calls.append(name)
                return turn(messages)

            return play

        def charge(messages: list) -> dict[str, Any]:
            # NOTE: a fresh id per call, as a provider gives: a re-run sees this one only if recorded.
            return {"content": "", "tool_calls": [{"name": "charge_card", "args": {"amount": 5}, "id": new_id()}]}

        def report(messages: list) -> str:
            self.stop("model")
            return "Charged 5."

        def leader(messages: list) -> str:
            done = any(f"Result from {MEMBER}" in str(m.content) for m in messages)
            return "The card is charged." if done else ""

        return {
            LEADER: [counted("create", lambda _: act(call("create_sub_agent", role_id="researcher", task="Charge 5.")))]
            + [counted("leader", leader)] * 5,
            MEMBER: [counted("charge", charge), counted("report", report)],
        }


def new_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the team keeps its thread (and so its journal): SQLite in its home, or a real PostgreSQL."""
    if request.param == "sqlite":
        monkeypatch.delenv("TEAMGRAPH_DB", raising=False)
    else:
        monkeypatch.setenv("TEAMGRAPH_DB", request.getfixturevalue("postgres_url"))
    return request.param


def team_for(card: Card, home: Path, scheduling: str) -> Team:
    return Team(
        model=ScriptedChatModel(card.script()),
        home=home,
        tools={"researcher": [card.tool()]},
        policy=Policy(scheduling=scheduling),
    )


def stop_after_the_tools(card: Card, monkeypatch: pytest.MonkeyPatch) -> None:
    """``crash="effects"``: the member's node stops after the card's charge is recorded, before its checkpoint."""
    summarize = role_graph.summarize

    def stopping(state: Any) -> Any:
        if any(
            isinstance(m, AIMessage) and any(c["name"] == "charge_card" for c in m.tool_calls) for m in state["turn"]
        ):
            flush()  # NOTE: what the journal writes behind the step is on disk when the process dies
            card.stop("effects")
        return summarize(state)

    monkeypatch.setattr(role_graph, "summarize", stopping)


def journal_of(team: Team) -> Any:
    """Where a team's step journal is: its own SQLite file, or the team's store (PostgreSQL)."""
    return team.runtime.journal_store or team.runtime.store


def crash_then_resume(
    tmp_path: Path, scheduling: str, crash: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Card, Team]:
    """Run the thread until the process stops at ``crash``, then resume it with a new Team."""
    card = Card(tmp_path, crash=crash)
    stop_after_the_tools(card, monkeypatch)
    with pytest.raises(Crash):
        team_for(card, tmp_path / "home", scheduling).compile().invoke({"messages": [("user", "Charge 5.")]}, CONFIG)
    resumed = team_for(card, tmp_path / "home", scheduling)
    journal = resumed.compile() and journal_of(resumed)
    assert journal is not None
    flush()  # NOTE: answers and results are written behind the step (the resumed run waits for them too)
    item = journal.get(run_namespace(THREAD), MEMBER)
    assert item is not None and item.value["answers"].keys() == {"0"}  # NOTE: recorded before the crash
    resumed.graph.invoke(None, CONFIG)
    return card, resumed


def member_history(team: Team) -> tuple[AIMessage, list[ToolMessage]]:
    history = team.history(CONFIG, MEMBER)
    asked = [m for m in history if isinstance(m, AIMessage) and m.tool_calls]
    results = [m for m in history if isinstance(m, ToolMessage)]
    assert len(asked) == 1, history
    return asked[0], results


SCHEDULERS = pytest.mark.parametrize("scheduling", ["lockstep", "completions"])


@SCHEDULERS
def test_a_tool_whose_result_was_recorded_is_not_run_again(
    tmp_path: Path, scheduling: str, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    card, team = crash_then_resume(tmp_path, scheduling, "effects", monkeypatch)

    assert card.crashed
    [charged] = card.charges()  # NOTE: charged once, though the step ran twice
    asked, [result] = member_history(team)
    assert charged == {"key": f"{THREAD}:{asked.tool_calls[0]['id']}", "attempt": 1}
    assert result.tool_call_id == asked.tool_calls[0]["id"] and RERUN_KEY not in result.additional_kwargs
    # NOTE: the call that made the tool call was recorded: not made again (its id would differ).
    assert card.calls.count("charge") == 1
    assert card.calls.count("report") == 1
    assert team.report(CONFIG) == "The card is charged."


@SCHEDULERS
def test_a_tool_the_process_died_in_runs_again_with_the_same_key(
    tmp_path: Path, scheduling: str, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    card, team = crash_then_resume(tmp_path, scheduling, "tool", monkeypatch)

    first, second = card.charges()
    assert first["key"] == second["key"] and (first["attempt"], second["attempt"]) == (1, 2)
    asked, [result] = member_history(team)
    assert first["key"] == f"{THREAD}:{asked.tool_calls[0]['id']}"
    assert result.additional_kwargs[RERUN_KEY] == 1  # NOTE: one earlier run did not finish
    assert result.status != "error" and str(result.content).endswith("charged 5")
    assert card.calls.count("charge") == 1
    assert team.report(CONFIG) == "The card is charged."


@SCHEDULERS
def test_a_call_that_finished_before_the_pass_was_saved_is_not_made_again(
    tmp_path: Path, scheduling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = Card(tmp_path, crash="none")
    sends = scheduler.sends

    def stop_once(runtime: Any, state: Any, finished: Any) -> Any:
        # NOTE: the member's call finished in the router's pool; the process dies before the pass is saved.
        if MEMBER in finished and not card.crashed:
            card.crashed = True
            raise Crash("router")
        return sends(runtime, state, finished)

    monkeypatch.setattr(scheduler, "sends", stop_once)
    with pytest.raises(Crash):
        team_for(card, tmp_path / "home", scheduling).compile().invoke({"messages": [("user", "Charge 5.")]}, CONFIG)
    resumed = team_for(card, tmp_path / "home", scheduling)
    resumed.compile().invoke(None, CONFIG)

    assert card.calls.count("charge") == 1  # NOTE: the pass made again takes the recorded answer
    assert len(card.charges()) == 1
    assert resumed.report(CONFIG) == "The card is charged."


def test_the_journal_keeps_one_item_per_agent_and_goes_when_the_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = Card(tmp_path, crash="effects")
    stop_after_the_tools(card, monkeypatch)
    team = team_for(card, tmp_path / "home", "lockstep")
    with pytest.raises(Crash):
        team.compile().invoke({"messages": [("user", "Charge 5.")]}, CONFIG)
    store = journal_of(team)
    assert store is not None
    flush()
    kept = {item.key: item.value["seq"] for item in store.search(run_namespace(THREAD))}
    dispatched = team.state(CONFIG)["team"]["in_flight"]
    # NOTE: the leader's earlier dispatch was replaced by its later one; the member's is the one in flight.
    assert kept.keys() == {LEADER, MEMBER} and kept[MEMBER] == dispatched[MEMBER]

    team.graph.invoke(None, CONFIG)
    assert team.report(CONFIG) == "The card is charged."
    assert store.search(run_namespace(THREAD)) == []
    assert store.search(JOURNAL_NAMESPACE) == []


class RecordingStore(InMemoryStore):
    """An in-memory store that keeps the namespace of every write."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[tuple[str, ...]] = []

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        self.written.extend(op.namespace for op in ops if isinstance(op, PutOp))
        return super().batch(ops)


def test_a_run_nothing_can_resume_keeps_no_journal(tmp_path: Path) -> None:
    card = Card(tmp_path, crash="none")
    store = RecordingStore()
    team = Team(
        model=ScriptedChatModel(card.script()),
        home=tmp_path / "home",
        tools={"researcher": [card.tool()]},
        checkpointer=False,
        store=store,
    )
    team.compile().invoke({"messages": [("user", "Charge 5.")]}, CONFIG)
    assert len(card.charges()) == 1
    assert not [ns for ns in store.written if ns[: len(JOURNAL_NAMESPACE)] == JOURNAL_NAMESPACE]


def test_the_journal_is_kept_in_the_team_s_store_and_never_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded: list[str] = []

    def embed(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return [[1.0, 0.0] for _ in texts]

    card = Card(tmp_path, crash="effects")
    stop_after_the_tools(card, monkeypatch)
    store = InMemoryStore(index={"embed": embed, "dims": 2})  # NOTE: a store set up for semantic search
    team = Team(
        model=ScriptedChatModel(card.script()),
        home=tmp_path / "home",
        tools={"researcher": [card.tool()]},
        checkpointer=InMemorySaver(),
        store=store,
    )
    with pytest.raises(Crash):
        team.compile().invoke({"messages": [("user", "Charge 5.")]}, CONFIG)
    flush()
    assert {item.key for item in store.search(run_namespace(THREAD))} == {LEADER, MEMBER}
    team.graph.invoke(None, CONFIG)
    assert len(card.charges()) == 1 and embedded == []


# --- a process that really dies ----------------------------------------------------------

KILLED = textwrap.dedent(
    """
    import json, os, sys

    from langchain_core.tools import InjectedToolCallId, tool
    from teamgraph import Policy, ScriptedChatModel, Team
    from teamgraph.tools import ToolContext

    HOME, LEDGER, CALLS = sys.argv[1], sys.argv[2], sys.argv[3]
    CRASH = sys.argv[4] == "crash"


    @tool
    def charge_card(amount: int, context: ToolContext) -> str:
        \"\"\"Charge the customer's card.\"\"\"
        with open(LEDGER, "a") as out:
            out.write(json.dumps({"key": context.idempotency_key, "attempt": context.attempt}) + "\\n")
        if CRASH:
            os._exit(17)  # the process dies after charging, before the tool returns
        return f"charged {amount}"


    def counted(name, turn):
        def play(messages):
            with open(CALLS, "a") as out:
                out.write(name + "\\n")
            return turn(messages)
        return play


    def charge(messages):
        called = {"name": "charge_card", "args": {"amount": 5}, "id": os.urandom(6).hex()}
        return {"content": "", "tool_calls": [called]}


    def leader(messages):
        return "The card is charged." if any("Result from Researcher_1" in str(m.content) for m in messages) else ""


    CREATE = {"name": "create_sub_agent", "args": {"role_id": "researcher", "task": "Charge 5."}}
    SCRIPT = {
        "Team Leader": [{"content": "", "tool_calls": [CREATE]}] + [leader] * 5,
        "Researcher_1": [counted("charge", charge), "Charged 5."],
    }
    team = Team(
        model=ScriptedChatModel(SCRIPT),
        home=HOME,
        tools={"researcher": [charge_card]},
        policy=Policy(scheduling="completions"),
    )
    config = {"configurable": {"thread_id": "card"}}
    team.compile().invoke({"messages": [("user", "Charge 5.")]} if CRASH else None, config)
    print(team.report(config))
    """
)


def test_a_killed_process_s_tool_runs_again_once_with_the_same_key(tmp_path: Path, database: str) -> None:
    module = tmp_path / "card_team.py"
    module.write_text(KILLED, encoding="utf-8")
    ledger, calls = tmp_path / "charges.jsonl", tmp_path / "calls.txt"
    argv = [sys.executable, str(module), str(tmp_path / "home"), str(ledger), str(calls)]

    killed = subprocess.run([*argv, "crash"], capture_output=True, text=True, timeout=120)
    assert killed.returncode == 17, killed.stderr[-3000:]
    resumed = subprocess.run([*argv, "resume"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    assert resumed.stdout.strip() == "The card is charged."
    first, second = (json.loads(line) for line in ledger.read_text().splitlines())
    assert first["key"] == second["key"] and (first["attempt"], second["attempt"]) == (1, 2)
    assert calls.read_text().split() == ["charge"]  # NOTE: the answer that called the tool was recorded
