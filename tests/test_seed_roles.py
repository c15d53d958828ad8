"""Collaboration spec §4.1 (role × permission matrix): declared tools, get_agent_*, resources, refusals."""

from __future__ import annotations

import pytest
from scripting import act, call, on_message
from tools_fixtures import R1, agent, context_for, result_of, run

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.governance.operations import sensitive_operation
from teamgraph.messaging.results import error_of
from teamgraph.records import LEADER, LEADER_ROLE_ID
from teamgraph.roles.matrix import refusal
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import errors, tools_for_role
from teamgraph.tools.errors import ToolError
from teamgraph.tools.files import write_file

MAKER, ENGINEER = "Tool Maker_1", "Full-Stack Engineer_1"
COUNT = {"name": "count_words", "description": "Count the words of a file.", "command": "wc -w {path}"}


def _maker_and_engineer(*, approve: bool) -> dict:
    review = act(call("review_plan", request_id="approval_1", approve=approve, feedback="ok"))
    engineer = call("create_sub_agent", role_id="full-stack-engineer", task="Count the words of notes.md.")
    rules = {"approval_1": review, "Count the words": act(engineer), "Result from Full-Stack": "Counted."}
    return {
        LEADER: [
            act(
                call("create_sub_agent", role_id="tool-maker", task="Make a word counter for the engineers."),
                call("write_file", path="notes.md", content="one two three"),
            ),
            *[on_message(rules)] * 12,
        ],
        MAKER: [
            act(call("register_tool", **COUNT, arguments={"path": "the file to count"})),
            act(call("endow_tool", tool_name="count_words", role_id="full-stack-engineer")),
            "Registered count_words for the engineers.",
        ],
        ENGINEER: [act(call("count_words", path="notes.md")), "Counted."],
    }


def _play(tmp_path, *, approve: bool) -> tuple[Team, dict]:
    """The tool maker registers and endows; then, from the team's next compile, an engineer counts."""
    model = ScriptedChatModel(_maker_and_engineer(approve=approve))
    team = Team(model=model, home=tmp_path / "home", policy=Policy(commands=("wc",)))
    config = {"configurable": {"thread_id": "tools"}}
    team.compile().invoke({"messages": [("user", "Make a word counter.")]}, config)
    # NOTE: a role's tools are bound when the graph is compiled (as for set_agent_config)
    team.compile().invoke({"messages": [("user", "Count the words of notes.md.")]}, config)
    return team, config


def _results(team: Team, config: dict, name: str, tool: str) -> list:
    history = team.history(config, name)
    ids = {c["id"] for m in history for c in getattr(m, "tool_calls", []) if c["name"] == tool}
    return [m for m in history if getattr(m, "tool_call_id", None) in ids]


def test_the_tool_maker_registers_a_tool_a_role_gets_after_approval(tmp_path):
    """Collaboration spec §4.1 (tool maker: tool registration) and §4.3 (a sensitive operation waits for the master)."""
    team, config = _play(tmp_path, approve=True)
    [registered] = _results(team, config, MAKER, "register_tool")
    [endowed] = _results(team, config, MAKER, "endow_tool")
    assert error_of(registered) is None and error_of(endowed) is None
    assert team.state(config)["requests"]["approval_1"]["status"] == "approved"
    [counted] = _results(team, config, ENGINEER, "count_words")
    assert error_of(counted) is None and "exit code: 0" in str(counted.content) and "3" in str(counted.content)


def test_a_rejected_endowment_gives_no_tool(tmp_path):
    """Collaboration spec §4.3: without the master's approval the role does not get the tool."""
    team, config = _play(tmp_path, approve=False)
    [counted] = _results(team, config, ENGINEER, "count_words")
    assert error_of(counted) == errors.UNKNOWN_TOOL


def test_a_declared_tool_runs_only_under_the_allow_list(tmp_path):
    """Collaboration spec §4.1 with the command allow-list: a declared tool is no way around it."""
    from teamgraph.governance import declared
    from teamgraph.tools.declared import build

    runtime = TeamRuntime(home=tmp_path, policy=Policy())
    spec = declared.DeclaredTool(**COUNT, arguments={"path": "the file"})
    declared.register(tmp_path, spec, builtin=set())
    with pytest.raises(ToolError) as refused:
        build(spec).func(context=context_for(runtime, R1), path="x; rm -rf /")
    assert refused.value.code == errors.FORBIDDEN and "'x; rm -rf /'" in str(refused.value)
    caller = runtime.roles["tool-maker"]
    assert sensitive_operation(runtime, "endow_tool", {"tool_name": "count_words", "role_id": "researcher"}, caller)
    bad = declared.DeclaredTool(name="bad_tool", description="x", command="wc {other}")
    with pytest.raises(declared.DeclaredToolError, match="other"):
        declared.register(tmp_path, bad, builtin=set())


def test_the_project_manager_has_the_get_agent_tools(tmp_path):
    """Collaboration spec §4.1: the project manager may call get_agent_*, set_task_*, call_agent."""
    runtime = TeamRuntime(home=tmp_path, policy=Policy())
    names = {t.name for t in tools_for_role(runtime, runtime.roles["project-manager"])}
    assert {"get_agent_config", "list_agents", "get_sub_agent_status", "call_agent", "set_task_status"} <= names
    assert refusal(runtime.matrix, runtime.roles["project-manager"], "Project Manager_1", "get_agent_config") is None


def test_a_role_limited_to_web_cannot_write_api(tmp_path):
    """Collaboration spec §4.1, the resources column: a role whose resources are web/ writes there only."""
    permissions = {"roles": {"ui-operator": {"resources": ["web/"]}}}
    runtime = TeamRuntime(home=tmp_path, policy=Policy(), permissions=permissions)
    agents = {LEADER: agent(LEADER_ROLE_ID), "UI Operator_1": agent("ui-operator")}
    context = context_for(runtime, "UI Operator_1", agents=agents, config={"configurable": {"thread_id": "t"}})
    assert error_of(result_of(run(write_file, context, path="web/login.html", content="<form>"))) is None
    with pytest.raises(ToolError) as refused:
        run(write_file, context, path="api/auth.py", content="x")
    assert refused.value.code == errors.FORBIDDEN and "web/" in str(refused.value)
    assert not (runtime.project_dir / "t" / "api").exists()


def test_a_refusal_never_lists_the_refused_role_among_those_allowed(tmp_path):
    """Collaboration spec §4.1: the project manager is denied run_command; the refusal says who may, not it."""
    runtime = TeamRuntime(home=tmp_path, policy=Policy())
    text = refusal(runtime.matrix, runtime.roles["project-manager"], "Project Manager_1", "run_command") or ""
    allowed = text.split("Who may:")[1].split(".")[0]
    assert "project-manager" not in allowed.split("except roles")[0]
    assert "project-manager" in allowed.split("except roles")[1].split(", or roles")[0]
    assert "full-stack-engineer" in allowed.split(", or roles")[1]
