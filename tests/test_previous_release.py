"""A home written by the previous release opens and goes on with this one.

``fixtures/previous_release/teamgraph-fe8a307.sqlite`` was written by teamgraph at
fe8a307 (langgraph 1.2.24, before the team was the graph: steps in a pool, the router's
``outbox`` a ``Topic``): thread ``demo-1`` is the finished demo (``teamgraph demo``),
thread ``paused-1`` the approval demo (``teamgraph/demo/approval.yaml`` under
``Policy(plan="human", require_plan=True)``) paused at its plan.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from langchain_core.messages import AIMessage
from langgraph.types import Command

from teamgraph import Policy, Team

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
