"""The permission matrix as data (docs/protocols.md, "Permissions"): each row allowed and refused, at load and call.

Load-time checks read real role files; call-time checks go through the real tools'
gate (``rule_call``, what ``run_tool_calls`` asks before every call). Team runs that
show the same rules end to end are in test_governance_team.py.
"""

from __future__ import annotations

import sys

import pytest

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.governance import board, commands
from teamgraph.governance.gate import rule_call
from teamgraph.roles import RoleFileError, write_role_file
from teamgraph.roles.matrix import DEFAULT_MATRIX, SET_TOOLS, PermissionsError
from teamgraph.tools import TOOL_SET_FACTORIES, tool_set
from teamgraph.tools.context import TeamView

# docs/protocols.md, "Permissions": role -> (tools it may call, tools it may not), with its level.
ROWS = {
    "team-leader": (
        [
            "create_sub_agent",
            "assign_agent_work",
            "create_task",
            "create_skill",
            "endow_skills",
            "get_agent_config",
            "set_agent_config",
            "set_permissions",
            "run_command",  # NOTE: leader spec's terminal, under the allow-list and approvals (issue 33)
        ],
        [],
    ),
    "project-manager": (
        [
            "get_agent_config",
            "set_task_status",
            "set_task_priority",
            "create_task",
            "call_agent",
            "list_tasks",
            "list_agents",
            "get_sub_agent_status",
        ],
        [
            "set_agent_config",
            "delete_agent",
            "set_permissions",
            "assign_agent_work",
            "create_skill",
            "run_command",
            "create_sub_agent",
        ],
    ),
    "task-manager": (
        ["set_task_status", "assign_agent_work", "create_task", "list_tasks"],
        ["create_skill", "set_skill", "endow_skills", "get_agent_config", "create_sub_agent", "list_agents"],
    ),
    "skill-teacher": (
        ["create_skill", "set_skill", "endow_skills", "delete_skill", "read_skill"],
        ["set_agent_config", "delete_agent", "set_permissions", "assign_agent_work", "create_task"],
    ),
    "tool-maker": (["run_command", "write_file"], ["set_agent_config", "delete_agent", "create_skill", "create_task"]),
    "hr-manager": (
        ["get_agent_config", "set_agent_config", "delete_agent", "list_agents", "get_sub_agent_status"],
        ["create_skill", "set_skill", "delete_skill", "set_permissions", "run_command", "create_sub_agent"],
    ),
    "researcher": (  # L4: every agent
        ["ask_master", "read_file", "call_agent", "list_skills", "read_skill", "list_tasks", "update_task"],
        ["create_task", "create_skill", "run_command", "get_agent_config", "assign_agent_work", "create_sub_agent"],
    ),
    "full-stack-engineer": (["run_command"], ["create_task", "set_agent_config"]),
    "code-reviewer": (["run_command"], ["create_skill"]),
}
LEVELS = {
    "team-leader": "L1",
    "project-manager": "L2",
    "hr-manager": "L2",
    "task-manager": "L3",
    "skill-teacher": "L3",
    "tool-maker": "L3",
}


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    return Team(model=ScriptedChatModel({}), home=tmp_path_factory.mktemp("matrix-home"))


def all_tools(team) -> dict:
    leader, member = team.roles["team-leader"], team.roles["researcher"]
    return {t.name: t for s in TOOL_SET_FACTORIES for side in (member, leader) for t in tool_set(team.runtime, s, side)}


def view_of(role_id: str, name: str = "Agent_1") -> TeamView:
    agents = {name: {"role": role_id, "status": "running"}}
    return TeamView(caller=name, agents=agents, requests={}, team={})


def test_the_static_set_table_matches_the_built_tools(team):
    for name in TOOL_SET_FACTORIES:
        sides = (team.roles["team-leader"], team.roles["researcher"])
        built = {t.name for side in sides for t in tool_set(team.runtime, name, side)}
        assert built == set(SET_TOOLS[name]), name


@pytest.mark.parametrize("role_id", list(ROWS))
def test_each_matrix_row_is_allowed_and_refused_at_call_time(team, role_id):
    allowed, refused = ROWS[role_id]
    tools = all_tools(team)
    role = team.roles[role_id]
    assert role.level == LEVELS.get(role_id, "L4")
    for name in allowed:
        assert rule_call(tools[name], {}, "c1", view_of(role_id), {}).refusal is None, (role_id, name)
    for name in refused:
        text = rule_call(tools[name], {}, "c1", view_of(role_id), {}).refusal
        assert text is not None, (role_id, name)
        # Names the agent, its role and level, the operation, and who may do it.
        assert text.startswith(f"permission denied: Agent_1 ({role_id}, level {role.level}) may not call {name}: ")
        assert "Who may: levels L1" in text


@pytest.mark.parametrize("role_id", [r for r in ROWS if r not in ("researcher", "team-leader")])
def test_each_matrix_row_loads_and_its_tools_are_refused_to_an_l4_role_without_its_grants(tmp_path, role_id):
    builtin = Team(model=ScriptedChatModel({}), home=tmp_path / "ok").roles[role_id]  # loads at its level
    guarded = [s for s in builtin.tools if DEFAULT_MATRIX["tool_sets"][s] != "L4"]
    assert guarded, role_id  # each row's own tools need more than L4
    folder = tmp_path / "roles"
    folder.mkdir()
    lowered = builtin.model_copy(update={"id": f"my-{role_id}", "level": "L4"})
    path = write_role_file(folder, lowered)
    with pytest.raises(RoleFileError) as caught:
        Team(model=ScriptedChatModel({}), home=tmp_path / "h", roles_dir=folder)
    error = caught.value
    assert (error.path, error.field) == (str(path), "tools")
    assert f"tool set '{guarded[0]}' needs level" in error.problem and "this role is level L4" in error.problem
    assert "remove" in error.fix and "permissions.yaml" in error.fix


def test_a_custom_l4_role_with_leader_tools_is_refused_at_load(tmp_path):
    folder = tmp_path / "roles"
    folder.mkdir()
    (folder / "boss.md").write_text("---\nid: boss\nname: Boss\nlevel: L4\ntools: [leader, member]\n---\nI boss.\n")
    with pytest.raises(
        RoleFileError,
        match=r"boss.md: field 'tools': tool set 'leader' needs level L1 or higher, "
        r"but this role is level L4\. Fix: remove 'leader' from tools, set 'level: L1'",
    ):
        Team(model=ScriptedChatModel({}), home=tmp_path / "h", roles_dir=folder)


def test_permissions_yaml_in_the_home_and_team_permissions_override_the_defaults(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "permissions.yaml").write_text("roles:\n  researcher:\n    grant: [run_command]\n")
    team = Team(model=ScriptedChatModel({}), home=home)
    tools = all_tools(team)
    assert rule_call(tools["run_command"], {}, "c", view_of("researcher"), {}).refusal is None
    # Team(permissions=...) wins over the file; a deny beats a level.
    denied = {"roles": {"hr-manager": {"deny": ["list_agents"]}}}
    team = Team(model=ScriptedChatModel({}), home=home, permissions=denied)
    text = rule_call(all_tools(team)["list_agents"], {}, "c", view_of("hr-manager"), {}).refusal
    assert text and "the matrix denies it to hr-manager" in text
    assert rule_call(all_tools(team)["run_command"], {}, "c", view_of("researcher"), {}).refusal is None


@pytest.mark.parametrize(
    "content, problem",
    [
        ("roles: [a, b]\n", "section 'roles' must be a mapping of keys to values"),
        ("levels: {L1: x}\n", "unknown section(s) levels"),
        ("tools: {run_command: L9}\n", "'tools.run_command': input should be 'l1', 'l2', 'l3' or 'l4'"),
        ("roles: {x: {grnt: [a]}}\n", "'roles.x.grnt': extra inputs are not permitted"),
    ],
)
def test_a_bad_permissions_file_is_refused_naming_the_file_and_the_key(tmp_path, content, problem):
    home = tmp_path / "home"
    home.mkdir()
    (home / "permissions.yaml").write_text(content)
    with pytest.raises(PermissionsError) as caught:
        Team(model=ScriptedChatModel({}), home=home)
    assert str(caught.value).startswith(f"{home / 'permissions.yaml'}: ")
    assert problem in str(caught.value)
    assert "Fix: " in str(caught.value)


# --- run_command, without a shell ---------------------------------------------------------------


def test_the_allow_list_matches_whole_arguments_so_no_second_command_slips_through():
    allow = ["python -m pytest", "ls", "git diff"]
    assert commands.is_allowed(allow, "python -m pytest -q tests")
    assert commands.is_allowed(allow, "ls -la")
    assert not commands.is_allowed(allow, "ls; rm -rf /")
    assert not commands.is_allowed(allow, "lsof")
    assert not commands.is_allowed(allow, "python -c 'import os'")
    assert not commands.is_allowed(allow, "git")


def test_a_command_runs_in_its_folder_with_a_time_out_and_clipped_output(tmp_path):
    exe = sys.executable
    here = commands.run_command(f"{exe} -c 'import os; print(os.getcwd())'", cwd=tmp_path)
    assert here == f"exit code: 0\n{tmp_path}"
    failed = commands.run_command(f"{exe} -c 'import sys; sys.exit(3)'", cwd=tmp_path)
    assert failed == "exit code: 3"
    # A pipe is just an argument: echo prints it, no second program runs.
    assert commands.run_command(f"{exe} -c 'import sys; print(sys.argv[1:])' '|' rm x", cwd=tmp_path) == (
        "exit code: 0\n['|', 'rm', 'x']"
    )
    long = commands.run_command(f"{exe} -c 'print(\"x\" * 20000)'", cwd=tmp_path)
    assert "[... output truncated: 12000 of 20000 characters cut ...]" in long
    slow = commands.run_command(f"{exe} -c 'import time; time.sleep(5)'", cwd=tmp_path, timeout=0.5)
    assert slow.startswith("timed out after 0.5 s (killed)")
    with pytest.raises(commands.CommandError, match="no program 'no-such-program-x'"):
        commands.run_command("no-such-program-x", cwd=tmp_path)


# --- the task board -------------------------------------------------------------------------------


def test_statuses_follow_the_work_and_dependants_unblock():
    tasks = board.add_task([], title="Facts", assignee=None, priority="normal", depends_on=[], by="TM")
    tasks[0]["role_id"] = "researcher"
    tasks = board.add_task(tasks, title="Write", assignee="Writer_1", priority="high", depends_on=["task_1"], by="TM")
    assert [t["status"] for t in tasks] == ["todo", "blocked"]
    tasks = board.work_event(tasks, agent="Researcher_1", role_id="researcher", event="started")
    assert (tasks[0]["status"], tasks[0]["assignee"]) == ("in_progress", "Researcher_1")
    tasks = board.work_event(tasks, agent="Researcher_1", role_id="researcher", event="ended")
    assert [t["status"] for t in tasks] == ["done", "todo"]
    tasks = board.work_event(tasks, agent="Writer_1", role_id="writer", event="started")
    tasks = board.work_event(tasks, agent="Writer_1", role_id="writer", event="failed")
    assert [t["status"] for t in tasks] == ["done", "failed"]
    with pytest.raises(board.BoardError, match="Unknown status 'finished'. Statuses: todo, in_progress, blocked"):
        board.update_task(tasks, "task_1", by="TM", status="finished")
    assert board.render(tasks) == [
        "task_2 [failed] (high) Write · Writer_1 after task_1",
        "task_1 [done] (normal) Facts · Researcher_1",
    ]


def test_policy_commands_is_part_of_the_policy():
    assert Policy(commands=["ls"]).commands == ("ls",)


def test_the_router_rule_follows_the_registry_from_start_to_report():
    planned = board.add_task([], title="Facts", assignee=None, priority="normal", depends_on=[], by="plan")
    planned[0]["role_id"] = "researcher"
    idle = {"Researcher_1": {"role": "researcher", "status": "idle", "turn": 0}}
    running = {"Researcher_1": {"role": "researcher", "status": "running", "turn": 1}}
    started = board.follow_work(planned, idle, running)
    assert (started[0]["status"], started[0]["assignee"]) == ("in_progress", "Researcher_1")
    assert board.follow_work(started, running, running) == started  # a step inside the turn moves nothing
    done = board.follow_work(started, running, {"Researcher_1": {**running["Researcher_1"], "status": "idle"}})
    assert done[0]["status"] == "done"
    failed = board.follow_work(started, running, {"Researcher_1": {**running["Researcher_1"], "status": "failed"}})
    assert failed[0]["status"] == "failed"


def test_sensitive_operations_name_known_conditions_and_governed_tools(tmp_path):
    from teamgraph.governance import operations
    from teamgraph.roles import matrix

    assert tuple(operations.CONDITIONS) == matrix.CONDITION_NAMES
    assert tuple(operations.EXECUTORS) == matrix.GOVERNED_TOOLS
    bad = {"sensitive": {"stop": {"tools": ["stop_sub_agent"]}, "x": {"tools": ["run_command"], "when": "friday"}}}
    with pytest.raises(PermissionsError, match=r"'sensitive.stop.tools': value error, stop_sub_agent cannot wait"):
        Team(model=ScriptedChatModel({}), home=tmp_path, permissions=bad)
