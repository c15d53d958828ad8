"""A home written by the previous release opens and goes on with this one.

``fixtures/previous_release/teamgraph-fe8a307.sqlite`` was written by teamgraph at
fe8a307 (langgraph 1.2.24, before the team was the graph: steps in a pool, the router's
``outbox`` a ``Topic``): thread ``demo-1`` is the finished demo (``teamgraph demo``),
thread ``paused-1`` the approval demo (``teamgraph/demo/approval.yaml`` under
``Policy(plan="human", require_plan=True)``) paused at its plan.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from langchain_core.messages import AIMessage
from langgraph.types import Command

from teamgraph import Policy, Team
from teamgraph.checkpoints.serde import TeamSerializer

FIXTURE = Path(__file__).parent / "fixtures" / "previous_release" / "teamgraph-fe8a307.sqlite"
DEMO = Path(__file__).resolve().parents[1] / "teamgraph" / "demo"


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(FIXTURE, home / "teamgraph.sqlite")
    return home


def test_a_finished_thread_of_the_previous_release_reads_whole(tmp_path: Path) -> None:
    team = Team(model=f"scripted:{DEMO / 'demo.yaml'}", home=_home(tmp_path))
    config = {"configurable": {"thread_id": "demo-1"}}
    state = team.compile().get_state(config)
    assert state.next == ()
    assert set(team.agents(config)) == {"Team Leader", "UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1"}
    assert "login feature is built" in state.values["messages"][-1].content
    assert any(isinstance(m, AIMessage) for m in team.history(config, "UI Operator_1"))


def test_a_thread_of_the_previous_release_paused_at_its_plan_resumes_to_the_report(tmp_path: Path) -> None:
    team = Team(
        model=f"scripted:{DEMO / 'approval.yaml'}",
        policy=Policy(plan="human", require_plan=True),
        home=_home(tmp_path),
    )
    graph = team.compile()
    config = {"configurable": {"thread_id": "paused-1"}}
    assert graph.get_state(config).next == ("human",)

    out = graph.invoke(Command(resume={"plan_1": {"approve": True, "feedback": ""}}), config)

    assert "__interrupt__" not in out
    assert out["messages"][-1].content.startswith("Recommendation (from Researcher_1)")
    assert team.agents(config)["Researcher_1"]["status"] == "idle"


def _stored_version_kinds(db: Path, thread_id: str) -> dict[str, set[type]]:
    """Per stored checkpoint of the thread, the kinds of its channel versions (as written)."""
    serde = TeamSerializer()
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ?", (thread_id,))
        kinds = {}
        for checkpoint_id, kind, blob in rows:
            checkpoint = serde.loads_typed((kind, blob))
            seen = [v for node in checkpoint["versions_seen"].values() for v in node.values()]
            kinds[checkpoint_id] = {type(v) for v in [*checkpoint["channel_versions"].values(), *seen]}
    return kinds


def test_a_string_versioned_thread_goes_on_and_forks_with_int_versions(tmp_path: Path) -> None:
    home = _home(tmp_path)
    db = home / "teamgraph.sqlite"
    old = _stored_version_kinds(db, "paused-1")
    assert set().union(*old.values()) == {str}
    team = Team(model=f"scripted:{DEMO / 'approval.yaml'}", policy=Policy(plan="human", require_plan=True), home=home)
    graph = team.compile()
    config = {"configurable": {"thread_id": "paused-1"}}
    paused = graph.get_state(config)
    approve = Command(resume={"plan_1": {"approve": True, "feedback": ""}})

    out = graph.invoke(approve, config)
    # NOTE: a fork of the old checkpoint itself: its branch starts from string versions too.
    forked = graph.invoke(approve, paused.config)

    for result in (out, forked):
        assert result["messages"][-1].content.startswith("Recommendation (from Researcher_1)")
    new = {cid: kinds for cid, kinds in _stored_version_kinds(db, "paused-1").items() if cid not in old}
    assert len(new) > 6
    assert set().union(*new.values()) == {int}
    # NOTE: read back, old and new checkpoints alike give ints (LangGraph takes the max of them).
    read = list(graph.checkpointer.list(config))
    assert len(read) == len(old) + len(new)
    assert {type(v) for found in read for v in found.checkpoint["channel_versions"].values()} == {int}
