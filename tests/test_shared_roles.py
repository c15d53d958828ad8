"""A role one replica's leader creates in the shared home is usable by a thread moved to another.

Two teams on one home stand for two replicas: the second was built before the role
existed (a replica loads the roles when it builds the graph), as the API server's
replicas are; ``TeamRuntime.refresh_roles`` runs before each run there. A long-lived
library process (a notebook, a worker) calls nothing: a role it does not know is looked
for in the home when a step or a tool needs it (``TeamRuntime.role``).
"""

from __future__ import annotations

import pytest
from test_team_persistence import ANALYST_SCRIPT

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.calls import VirtualCallPool
from teamgraph.governance.gate import rule_call
from teamgraph.tools import tool_set
from teamgraph.tools.context import TeamView
from tests.invariants import assert_team_invariants

CONFIG = {"configurable": {"thread_id": "moved"}}


def test_a_thread_moved_to_a_replica_built_before_its_custom_role_finds_the_role(tmp_path):
    home = tmp_path / "shared-home"
    replica_b = Team(model=ScriptedChatModel(ANALYST_SCRIPT), home=home)
    graph_b = replica_b.compile()
    assert replica_b.runtime.refresh_roles() is False

    replica_a = Team(model=ScriptedChatModel(ANALYST_SCRIPT), home=home)
    replica_a.compile().invoke({"messages": [("user", "Analyse Q1")]}, CONFIG)
    assert "data-analyst" in replica_a.roles and "data-analyst" not in replica_b.roles

    assert replica_b.runtime.refresh_roles() is True
    assert replica_b.runtime.refresh_roles() is False  # NOTE: nothing new since
    graph_b.invoke({"messages": [("user", "Analyse Q2")]}, CONFIG)
    agents = replica_b.agents(CONFIG)
    assert {name: (a["role"], a["status"]) for name, a in agents.items() if name != "Team Leader"} == {
        "Data Analyst_1": ("data-analyst", "idle"),
        "Data Analyst_2": ("data-analyst", "idle"),
    }
    assert replica_b.report(CONFIG) == "Q2 done."


def _spawn_first(script: dict) -> dict:
    """``script`` whose leader, asked for Q2, creates the second analyst before it messages the first."""
    leader = script["Team Leader"][0]

    def turn(messages):
        answer = leader(messages)
        calls = answer.get("tool_calls", []) if isinstance(answer, dict) else []
        if [c["name"] for c in calls] == ["list_agents", "send_message_to_sub_agent", "create_sub_agent"]:
            answer = {**answer, "tool_calls": [calls[2], calls[0], calls[1]]}
        return answer

    return {**script, "Team Leader": [turn] * len(script["Team Leader"])}


@pytest.mark.parametrize("order", ["message-first", "spawn-first"])
@pytest.mark.parametrize("finishes_first", ["lockstep", "Data Analyst_1", "Data Analyst_2"])
def test_a_library_process_finds_a_role_another_process_created_without_a_reload(tmp_path, order, finishes_first):
    # NOTE: asked for Q2, the leader messages the first analyst (whose role this process never
    # loaded) and creates a second one in the same step, in either order; under "completions"
    # both analysts' steps are in flight at once and either finishes first.
    home = tmp_path / "shared-home"
    script = ANALYST_SCRIPT if order == "message-first" else _spawn_first(ANALYST_SCRIPT)
    scheduling = "lockstep" if finishes_first == "lockstep" else "completions"
    library = Team(model=ScriptedChatModel(script), home=home, policy=Policy(scheduling=scheduling))
    if scheduling == "completions":
        slow = "Data Analyst_2" if finishes_first == "Data Analyst_1" else "Data Analyst_1"
        library.runtime.calls = VirtualCallPool(latency=lambda agent, n: 3.0 if agent == slow else 1.0)
    graph = library.compile()  # NOTE: built before the role exists, and never reloaded below

    other = Team(model=ScriptedChatModel(ANALYST_SCRIPT), home=home)
    other.compile().invoke({"messages": [("user", "Analyse Q1")]}, CONFIG)
    assert "data-analyst" not in library.roles

    # The thread moves here: its member of that role steps, and the leader creates another.
    graph.invoke({"messages": [("user", "Analyse Q2")]}, CONFIG)
    agents = library.agents(CONFIG)
    assert {name: (a["role"], a["status"]) for name, a in agents.items() if name != "Team Leader"} == {
        "Data Analyst_1": ("data-analyst", "idle"),
        "Data Analyst_2": ("data-analyst", "idle"),
    }
    assert library.report(CONFIG) == "Q2 done." and "data-analyst" in library.roles
    assert_team_invariants(graph.get_state(CONFIG).values)


def test_an_unknown_role_is_still_refused_with_the_roles_there_are(tmp_path):
    team = Team(model=ScriptedChatModel({}), home=tmp_path)
    assert team.runtime.role("no-such-role") is None
    assert team.runtime.role("researcher") is not None


def test_a_broken_role_file_is_not_reloaded_at_every_run(tmp_path):
    home = tmp_path / "shared-home"
    team = Team(model=ScriptedChatModel({}), home=home)
    team.compile()
    (home / "roles").mkdir(exist_ok=True)
    (home / "roles" / "broken.md").write_text("no front matter", encoding="utf-8")
    with pytest.warns(RuntimeWarning, match="broken.md"):
        assert team.runtime.refresh_roles() is True
    assert list(team.runtime.role_problems) and team.runtime.refresh_roles() is False


def test_the_permission_gate_judges_an_agent_by_a_role_another_process_wrote(tmp_path):
    # NOTE: before roles were looked up through TeamRuntime.role, a role this process had not
    # loaded made the gate allow every call of its agents (no role, no rule).
    home = tmp_path / "shared-home"
    here = Team(model=ScriptedChatModel({}), home=home)
    other = Team(model=ScriptedChatModel({}), home=home)
    other.runtime.add_role(other.roles["researcher"].model_copy(update={"id": "scout", "name": "Scout"}))
    assert "scout" not in here.roles
    admin = {t.name: t for t in tool_set(here.runtime, "admin", here.roles["team-leader"])}
    view = TeamView(caller="Scout_1", agents={"Scout_1": {"role": "scout", "status": "running"}}, requests={}, team={})

    refused = rule_call(admin["delete_agent"], {}, "c1", view, {}).refusal

    assert refused is not None and refused.startswith("permission denied: Scout_1 (scout, level L4)")


def test_a_relative_home_keeps_every_file_of_the_team_in_its_folder_after_a_chdir(tmp_path, monkeypatch):
    # NOTE: a notebook's `%cd` between building the team and running it: the role file, the
    # project folder, the log and the database stay in the home the team was made with.
    made_in, moved_to = tmp_path / "made-in", tmp_path / "moved-to"
    made_in.mkdir(), moved_to.mkdir()
    monkeypatch.chdir(made_in)
    team = Team(model=ScriptedChatModel(ANALYST_SCRIPT), home=".teamgraph")
    graph = team.compile()
    monkeypatch.chdir(moved_to)
    graph.invoke({"messages": [("user", "Analyse Q1")]}, CONFIG)
    assert team.report(CONFIG) == "Q1 analysed."
    home = made_in / ".teamgraph"
    assert team.home == home
    assert (home / "roles" / "data-analyst.md").is_file()
    assert (home / "project" / "moved").is_dir() and list((home / "logs" / "moved").glob("*.log"))
    assert list(moved_to.iterdir()) == []
