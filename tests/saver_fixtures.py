"""Helpers for the tests of the Team's saver: a thread's values compared with what LangGraph's
own SqliteSaver rebuilds from the same file, and a second turn taken by a new Team (a resume).

Use it from a test module with ``from tests.saver_fixtures import plain, ...``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.checkpoints.saver import TeamSqliteSaver
from teamgraph.checkpoints.serde import TeamSerializer
from teamgraph.history import History

LEADER = "Team Leader"
R1, U1 = "Researcher_1", "UI Operator_1"
CHANNELS = ("histories", "agents", "requests", "deliveries", "messages")
"""The DeltaChannels of a team's state: the channels the Team's saver replays from writes."""


def plain(value: Any) -> Any:
    """A state value with every History as a list (what a reader compares)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (History, list, tuple)):
        return [plain(v) for v in value]
    return value


def reference_graph(team_home, db_path):
    """The Team's graph on LangGraph's own SqliteSaver (one write replayed at a time), same file."""
    reference = SqliteSaver(sqlite3.connect(db_path, check_same_thread=False), serde=TeamSerializer())
    return Team(model=ScriptedChatModel({}), home=team_home, checkpointer=reference).compile()


def assert_every_checkpoint_reads_as_langgraphs(team_home, team: Team, config: dict) -> int:
    """Every checkpoint of the thread (all branches) loads to the values LangGraph's saver rebuilds."""
    ours = Team(model=ScriptedChatModel({}), home=team_home).compile()
    assert isinstance(ours.checkpointer, TeamSqliteSaver)
    theirs = reference_graph(team_home, team.db_path)
    checked = 0
    for snapshot in theirs.get_state_history(config):
        mine = ours.get_state(snapshot.config)
        for channel in CHANNELS:
            assert plain(mine.values.get(channel)) == plain(snapshot.values.get(channel)), (
                channel,
                snapshot.config["configurable"]["checkpoint_id"],
            )
        checked += 1
    assert [plain(x.values) for x in ours.get_state_history(config)] == [
        plain(x.values) for x in theirs.get_state_history(config)
    ]
    latest = ours.get_state(config)
    assert plain(latest.values) == plain(theirs.get_state(config).values)
    return checked


def second_turn(team_home, config: dict, *, policy: Policy | None = None):
    """A new Team on the same file answers one more message (the resume path)."""
    first_turns = sum(m.type == "ai" for m in Team(model=ScriptedChatModel({}), home=team_home).history(config, LEADER))
    again = Team(model=ScriptedChatModel({LEADER: [*[""] * first_turns, "All done."]}), home=team_home, policy=policy)
    again.compile().invoke({"messages": [HumanMessage("Anything left?")]}, config)
    return again
