"""HR's agent management, project folder naming, and the task board in the CLI's live view."""

from __future__ import annotations

import json

from rich.console import Console
from scripting import act, call, error_codes, errors_of, quiet

from teamgraph import ScriptedChatModel, Team
from teamgraph.cli.live import TeamView
from teamgraph.tools import errors

LEADER = "Team Leader"
HR = "HR Manager_1"


def test_hr_reads_and_changes_agent_configuration_and_sees_the_team(run_team, team_home):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="hr-manager", task="Tune the researcher.")), *quiet()],
            HR: [
                act(
                    call("get_agent_config", role_id="researcher"),
                    call("set_agent_config", role_id="researcher", field="description", value="Finds facts fast."),
                    call("set_agent_config", role_id="researcher", field="colour", value="blue"),
                    call("set_agent_config", role_id="nobody", field="prompt", value="x"),
                    call("list_agents"),
                    call("get_sub_agent_status", display_names=HR),
                    call("create_skill", name="x", description="x", body="x"),
                ),
                "Tuned.",
            ],
        }
    )
    config = json.loads(run.tool_texts(HR, "get_agent_config")[0])
    assert (config["id"], config["level"]) == ("researcher", "L4")
    assert config["tools"] == ["member", "files", "protocols", "sessions", "skills"]
    assert run.tool_texts(HR, "set_agent_config")[0].startswith("researcher.description set; saved to ")
    assert run.team.roles["researcher"].description == "Finds facts fast."
    assert "description: Finds facts fast." in (team_home / "roles" / "researcher.md").read_text()
    assert error_codes(run, HR) == [errors.BAD_ARGUMENT, errors.BAD_ARGUMENT, errors.UNKNOWN_TOOL]
    assert all(name in errors_of(run, HR)[2] for name in _tool_names(run, HR))  # NOTE: it lists the HR's tools
    assert "researcher" in {r["role_id"] for r in json.loads(run.tool_texts(HR, "list_agents")[0])}
    assert json.loads(run.tool_texts(HR, "get_sub_agent_status")[0])[HR]["role_id"] == "hr-manager"


def _tool_names(run, name: str) -> list[str]:
    from teamgraph.tools import tools_for_role

    return [t.name for t in tools_for_role(run.team.runtime, run.team.roles[run.agents()[name]["role"]])]


def test_the_project_folder_is_named_by_the_config_then_the_team_then_the_thread(tmp_path):
    team = Team(model=ScriptedChatModel({}), home=tmp_path)
    assert team.runtime.project_folder({"configurable": {"thread_id": "t/1"}}) == tmp_path / "project" / "t_1"
    named = {"configurable": {"thread_id": "t1", "project_name": "shop"}}
    assert team.runtime.project_folder(named) == tmp_path / "project" / "shop"
    fixed = Team(model=ScriptedChatModel({}), home=tmp_path, project="site")
    assert fixed.runtime.project_folder({"configurable": {"thread_id": "t1"}}) == tmp_path / "project" / "site"
    assert fixed.runtime.project_folder(named) == tmp_path / "project" / "shop"
    assert team.runtime.project_folder({"configurable": {"thread_id": ".."}}) == tmp_path / "project" / "default"


def test_the_live_view_shows_the_board_and_each_move():
    view = TeamView("t")
    task = {"id": "task_1", "title": "Survey", "assignee": "Researcher_1", "priority": "high", "status": "todo"}
    assert view.apply("router", {"team": {"board": [task]}}) == ["▣ task_1 Survey: new → todo"]
    assert view.apply("router", {"team": {"board": [{**task, "status": "done"}]}}) == ["▣ task_1 Survey: todo → done"]
    console = Console(width=120, record=True)
    console.print(view)
    (row,) = [line for line in console.export_text().splitlines() if line.startswith("task_1")]
    assert row.split()[:3] == ["task_1", "done", "Researcher_1"] and "Survey" in row


def test_the_master_changes_the_matrix_at_run_time_and_it_is_saved(run_team, team_home):
    grant = "roles: {researcher: {grant: [run_command]}}"
    run = run_team(
        {LEADER: [act(call("set_permissions", yaml=grant), call("set_permissions", yaml="tools: {x: L9}")), *quiet()]}
    )
    ok = run.tool_result(LEADER, "set_permissions")
    assert ok.startswith(f"Permissions updated ({team_home / 'permissions.yaml'}); ")
    assert error_codes(run, LEADER, "set_permissions") == [errors.BAD_ARGUMENT]
    assert "'tools.x'" in run.tool_result(LEADER, "set_permissions", 1)  # NOTE: it names the field to fix
    assert run.team.runtime.matrix.roles["researcher"].grant == ("run_command",)
    assert "grant:\n    - run_command" in (team_home / "permissions.yaml").read_text()


def test_a_role_with_members_in_the_thread_is_not_deleted_even_when_approved(hitl_team, team_home):
    from teamgraph import Policy
    from teamgraph.roles import Role, write_role_file

    path = write_role_file(team_home / "roles", Role(id="analyst", name="Analyst", prompt="Analyse."))
    run = hitl_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="analyst"),
                    call("create_sub_agent", role_id="hr-manager", task="Remove the analyst role."),
                ),
                *quiet(),
            ],
            HR: [act(call("delete_agent", role_id="analyst")), "Could not."],
        },
        policy=Policy(approval="human"),
        fresh=True,
    )
    assert "approval_1" in run.interrupt_of(run.send("Go"))["requests"]
    run.resume({"approval_1": {"approve": True}})
    assert run.tool_texts(HR, "delete_agent") == [
        "approval_1 approved by the user.\nError: delete_agent failed: Role 'analyst' has members in this thread; "
        "terminate them first (terminate_sub_agent), then delete it."
    ]
    assert path.is_file() and "analyst" in run.team.roles
