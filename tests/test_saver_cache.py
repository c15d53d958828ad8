"""The Team's SQLite saver hands out the histories it rebuilt for a checkpoint again, never stale ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints.saver import TeamSqliteSaver, open_sqlite_saver

LEADER = "Team Leader"
CONFIG = {"configurable": {"thread_id": "cache-1"}}


REPLIES = ["First answer.", "Second answer."]


def _team(home: Path) -> tuple[Team, TeamSqliteSaver]:
    saver = open_sqlite_saver(home / "teamgraph.sqlite")
    return Team(model=ScriptedChatModel({LEADER: REPLIES}), home=home, checkpointer=saver), saver


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Checkpoint ids whose histories were rebuilt from the file."""
    seen: list[str] = []
    original = SqliteSaver.get_delta_channel_history

    def counted(self, *, config, channels):
        seen.append(config["configurable"]["checkpoint_id"])
        return original(self, config=config, channels=channels)

    monkeypatch.setattr(SqliteSaver, "get_delta_channel_history", counted)
    return seen


def test_reading_the_state_then_running_rebuilds_the_histories_once(tmp_path: Path, rebuilds: list[str]) -> None:
    team, _ = _team(tmp_path)
    graph = team.compile()
    graph.invoke({"messages": [("user", "One")]}, CONFIG)
    resumed, _ = _team(tmp_path)  # NOTE: a new saver, as in a new process
    graph = resumed.compile()
    rebuilds.clear()
    before = graph.get_state(CONFIG).values["histories"][LEADER]
    graph.invoke({"messages": [("user", "Two")]}, CONFIG)
    assert len(rebuilds) == 1, rebuilds
    after = graph.get_state(CONFIG).values["histories"][LEADER]
    assert after[: len(before)] == before
    assert [m.text for m in after if isinstance(m, AIMessage)][-2:] == ["First answer.", "Second answer."]


def test_a_checkpoint_written_by_another_saver_is_read_from_the_file(tmp_path: Path) -> None:
    first, _ = _team(tmp_path)
    first_graph = first.compile()
    first_graph.invoke({"messages": [("user", "One")]}, CONFIG)
    assert len(first_graph.get_state(CONFIG).values["histories"][LEADER]) == 2
    other, _ = _team(tmp_path)  # NOTE: another process writes the thread
    other.compile().invoke({"messages": [("user", "Two")]}, CONFIG)
    history = first_graph.get_state(CONFIG).values["histories"][LEADER]
    assert [m.text for m in history] == ["One", "First answer.", "Two", "Second answer."]
