"""The Team's savers number channel versions with ints, and go on with threads numbered with strings.

LangGraph's SqliteSaver makes each version a 51-character string; the Team's savers use ints
(LangGraph's default) and read an older thread's strings as ints, so no thread mixes the two
kinds (LangGraph compares a channel's versions and takes the max of a checkpoint's).
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints.aio import open_async_sqlite_saver
from teamgraph.checkpoints.saver import TeamSqliteSaver, with_int_versions
from teamgraph.checkpoints.serde import TeamSerializer
from tests.saver_fixtures import LEADER, assert_every_checkpoint_reads_as_langgraphs
from tests.test_calls_in_flight import two_members as script


def stored_kinds(db: Path, thread_id: str) -> list[set[type]]:
    """The kinds of each stored checkpoint's versions, oldest first."""
    serde = TeamSerializer()
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id", (thread_id,)
        ).fetchall()
    kinds = []
    for kind, blob in rows:
        checkpoint = serde.loads_typed((kind, blob))
        seen = [v for node in checkpoint["versions_seen"].values() for v in node.values()]
        kinds.append({type(v) for v in [*checkpoint["channel_versions"].values(), *seen]})
    return kinds


def test_a_new_thread_on_the_teams_saver_stores_int_versions(team_home):
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    graph = team.compile()
    assert isinstance(graph.checkpointer, TeamSqliteSaver)
    config = {"configurable": {"thread_id": "ints"}}
    graph.invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    kinds = stored_kinds(team.db_path, "ints")
    assert len(kinds) > 5
    assert set().union(*kinds) == {int}


def test_the_async_saver_goes_on_with_a_thread_langgraphs_saver_wrote_with_strings(team_home):
    config = {"configurable": {"thread_id": "strings"}}
    db = team_home / "teamgraph.sqlite"
    team_home.mkdir(parents=True)
    plain_saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=TeamSerializer())
    Team(model=ScriptedChatModel(script()), home=team_home, checkpointer=plain_saver).compile().invoke(
        {"messages": [HumanMessage("Please do the work.")]}, config
    )
    before = len(stored_kinds(db, "strings"))

    async def main() -> str:
        async with open_async_sqlite_saver(db) as saver:
            reader = Team(model=ScriptedChatModel({}), home=team_home)
            turns = sum(m.type == "ai" for m in reader.history(config, LEADER))
            again = Team(
                model=ScriptedChatModel({LEADER: [*[""] * turns, "All done."]}), home=team_home, checkpointer=saver
            )
            await again.compile().ainvoke({"messages": [HumanMessage("Anything left?")]}, config)
            return (await again.ahistory(config, LEADER))[-1].text

    assert asyncio.run(main()) == "All done."
    kinds = stored_kinds(db, "strings")
    assert set().union(*kinds[:before]) == {str}
    assert set().union(*kinds[before:]) == {int}
    team = Team(model=ScriptedChatModel({}), home=team_home)
    assert assert_every_checkpoint_reads_as_langgraphs(team_home, team, config) == len(kinds)


def test_string_versions_read_as_their_counters_in_order():
    older = f"{7:032}.{0.9:016}"
    newer = f"{8:032}.{0.1:016}"
    checkpoint = {"channel_versions": {"a": newer, "b": older}, "versions_seen": {"n": {"a": older}}}
    read = with_int_versions(checkpoint)  # type: ignore[arg-type]
    assert read["channel_versions"] == {"a": 8, "b": 7}
    assert read["versions_seen"] == {"n": {"a": 7}}
    unchanged = {"channel_versions": {"a": 3}, "versions_seen": {}}
    assert with_int_versions(unchanged) is unchanged  # type: ignore[arg-type]
