"""Component tests: tools called directly with a fake ToolContext (no graph, no model).

Each test asserts what a tool returns (an immediate result or a deferred call), the
effects it asks the router for (by kind, ids, fields), or the refusal it raises.
"""

from __future__ import annotations

import json
import math

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from tools_fixtures import R1, R2, agent, context_for, effects_of, request, result_of, run

from teamgraph.governance.gate import GATE_KEY
from teamgraph.messaging import effects
from teamgraph.nodes.tool_calls import context_parameter, run_tool_calls
from teamgraph.policy import Policy
from teamgraph.protocols.requests import APPROVED, ASK, COUNTER, MEMBER_PLAN, PLAN, QUESTION, RUN, SHUTDOWN
from teamgraph.records import IDLE, LEADER, LEADER_ROLE_ID, RUNNING, TERMINATED
from teamgraph.roles import Role
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import TOOL_SET_FACTORIES, errors, tool_set
from teamgraph.tools.admin import get_agent_config
from teamgraph.tools.collaboration import assign_agent_work, call_agent, call_agents
from teamgraph.tools.commands import run_command
from teamgraph.tools.context import ToolContext
from teamgraph.tools.errors import ToolError
from teamgraph.tools.files import read_file, write_file
from teamgraph.tools.leader import create_sub_agent, get_sub_agent_status, list_agents, sleep, terminate_sub_agent
from teamgraph.tools.member import answer_other_agent, ask_master, ask_other_agent
from teamgraph.tools.protocols import propose_plan, review_plan, send_message, shutdown_request, shutdown_response
from teamgraph.tools.sessions import sessions_send, sessions_spawn
from teamgraph.tools.skills import create_skill, endow_skills, read_skill
from teamgraph.tools.tasks import create_task, set_task_status
from teamgraph.tools.teammates import spawn_teammate

ALL_TOOLS: list[BaseTool] = list(
    {id(t): t for s in TOOL_SET_FACTORIES.values() for t in [*s.leader, *(s.member or [])]}.values()
)


@pytest.fixture
def runtime(tmp_path) -> TeamRuntime:
    """A real team runtime (built-in roles, default policy, a home in tmp_path)."""
    return TeamRuntime(home=tmp_path, policy=Policy())


def refused(tool_: BaseTool, context: ToolContext, **args) -> ToolError:
    """The error ``tool_`` raises for ``args`` (assert its ``code``; its text only for what it lists)."""
    with pytest.raises(ToolError) as caught:
        run(tool_, context, **args)
    return caught.value


# --- schemas ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_", ALL_TOOLS, ids=lambda t: t.name)
def test_every_argument_the_model_sees_has_a_description_and_the_context_is_hidden(tool_):
    schema = tool_.tool_call_schema.model_json_schema()
    properties = schema.get("properties", {})

    assert context_parameter(tool_) == "context"  # NOTE: every built-in tool reads the team or the runtime
    assert not {"context", "view", "tool_call_id", "config"} & set(properties)
    assert not [name for name, prop in properties.items() if not prop.get("description")]
    assert schema["description"] and "Args:" not in schema["description"]


def test_tool_sets_give_each_team_its_own_gated_copies(tmp_path):
    one, two = (TeamRuntime(home=tmp_path / n, policy=Policy()) for n in ("a", "b"))
    leader = one.roles[LEADER_ROLE_ID]
    first, second = tool_set(one, "leader", leader), tool_set(two, "leader", leader)

    assert first[0].metadata[GATE_KEY].runtime is one
    assert second[0].metadata[GATE_KEY].runtime is two
    assert GATE_KEY not in (create_sub_agent.metadata or {})


# --- the executor injects the context by type --------------------------------------------------------------------


SEEN: list[ToolContext] = []


@tool
def whoami(ctx: ToolContext) -> str:
    """Say who calls and what this step asked for so far."""
    SEEN.append(ctx)
    return f"{ctx.caller}:{ctx.tool_call_id}:{len(ctx.effects)}"


def test_run_tool_calls_injects_the_context_by_type_with_the_step_effects_so_far(runtime):
    view = context_for(runtime).view
    ai = AIMessage(
        content="",
        tool_calls=[
            {"name": "create_sub_agent", "args": {"role_id": "researcher"}, "id": "a"},
            {"name": "create_sub_agent", "args": {"role_id": "researcher"}, "id": "b"},
            {"name": "whoami", "args": {}, "id": "c"},
        ],
    )
    tools = {"create_sub_agent": create_sub_agent, "whoami": whoami}

    messages, step_effects, deferred = run_tool_calls(ai, tools, view, {}, runtime=runtime)

    assert [e["name"] for e in step_effects] == ["Researcher_1", "Researcher_2"]
    assert [m.tool_call_id for m in messages] == ["a", "b", "c"]
    assert messages[2].content == f"{LEADER}:c:2"
    assert deferred == []
    assert "ctx" not in whoami.tool_call_schema.model_json_schema()["properties"]
    assert SEEN[-1].view is view and SEEN[-1].runtime is runtime  # NOTE: passed through, not validated into a copy


# --- member ------------------------------------------------------------------------------------------------------


def test_ask_master_defers_an_ask_request_and_refuses_the_leader(runtime):
    out = run(ask_master, context_for(runtime, R1), question="Which format?")

    assert result_of(out) is None
    [opened] = effects_of(out)
    assert (opened["kind"], opened["request_kind"], opened["call_id"], opened["tool"]) == (
        "open",
        ASK,
        "c1",
        "ask_master",
    )
    assert refused(ask_master, context_for(runtime, LEADER), question="?").code == errors.SELF_ADDRESS


def test_ask_other_agent_refuses_yourself_the_leader_and_unknown_agents(runtime):
    member = context_for(runtime, R1)

    assert refused(ask_other_agent, member, display_name=R1, question="?").code == errors.SELF_ADDRESS
    assert refused(ask_other_agent, member, display_name=LEADER, question="?").code == errors.NOT_A_MEMBER
    unknown = refused(ask_other_agent, member, display_name="Nobody_9", question="?")
    assert unknown.code == errors.UNKNOWN_AGENT and R2 in str(unknown)  # NOTE: it lists the active members
    [opened] = effects_of(run(ask_other_agent, member, display_name=R2, question="Sources?"))
    assert (opened["request_kind"], opened["to"], opened["reply_via"]) == (QUESTION, R2, "tool")


def test_answer_other_agent_answers_once(runtime):
    question = request("question_3", QUESTION, R2, R1)
    out = run(
        answer_other_agent, context_for(runtime, R1, requests=[question]), question_id="question_3", answer="Yes."
    )

    [answer] = effects_of(out)
    assert (answer["kind"], answer["request_id"], answer["answer"]) == ("answer", "question_3", "Yes.")
    assert result_of(out).tool_call_id == "c1"
    again = context_for(runtime, R1, requests=[question], effects=[answer])
    assert refused(answer_other_agent, again, question_id="question_3", answer="No.").code == errors.ALREADY_ANSWERED
    unknown = refused(answer_other_agent, context_for(runtime, R1), question_id="question_9", answer="?")
    assert unknown.code == errors.UNKNOWN_REQUEST


# --- leader ------------------------------------------------------------------------------------------------------


def test_create_sub_agent_numbers_members_across_the_book_and_the_step(runtime):
    context = context_for(runtime, team={"instances": {"Researcher": 2}})

    [spawn] = effects_of(run(create_sub_agent, context, role_id="researcher", task="Survey."))
    assert (spawn["kind"], spawn["role"], spawn["name"], spawn["task"]) == (
        "spawn",
        "researcher",
        "Researcher_3",
        "Survey.",
    )
    later = context_for(runtime, team={"instances": {"Researcher": 2}}, effects=[spawn])
    assert effects_of(run(create_sub_agent, later, role_id="researcher"))[0]["name"] == "Researcher_4"


def test_create_sub_agent_refuses_unknown_roles_the_leader_role_and_work_before_the_plan(runtime):
    unknown = refused(create_sub_agent, context_for(runtime), role_id="astronaut")
    assert unknown.code == errors.UNKNOWN_ROLE and "researcher" in str(unknown)  # NOTE: it lists the roles
    assert refused(create_sub_agent, context_for(runtime), role_id=LEADER_ROLE_ID).code == errors.UNKNOWN_ROLE
    runtime.policy = runtime.policy.model_copy(update={"require_plan": True})
    assert refused(create_sub_agent, context_for(runtime), role_id="researcher").code == errors.PLAN_REQUIRED
    approved = context_for(runtime, team={"plan": {"status": APPROVED}})
    assert effects_of(run(create_sub_agent, approved, role_id="researcher"))[0]["kind"] == effects.SPAWN


def test_terminate_and_sleep_check_the_member(runtime):
    agents = {LEADER: agent(LEADER_ROLE_ID), R1: agent("researcher"), R2: agent("researcher", TERMINATED)}
    context = context_for(runtime, agents=agents)

    assert effects_of(run(terminate_sub_agent, context, display_name=R1)) == [effects.terminate(target=R1)]
    assert refused(terminate_sub_agent, context, display_name=R2).code == errors.AGENT_ENDED
    assert refused(terminate_sub_agent, context, display_name=LEADER).code == errors.SELF_ADDRESS
    [wait] = effects_of(run(sleep, context, wait_sub_agent_output=R1))
    assert (wait["kind"], wait["on"], wait["call_id"]) == ("wait_output", R1, "c1")
    idle = context_for(runtime, agents={**agents, R1: agent("researcher", IDLE)})
    out = run(sleep, idle, wait_sub_agent_output=R1)
    assert effects_of(out) == [] and result_of(out) is not None  # NOTE: nothing to wait for: answered at once


def test_leader_listings(runtime):
    roles = {row["role_id"] for row in json.loads(run(list_agents, context_for(runtime)))}
    assert "researcher" in roles and LEADER_ROLE_ID not in roles
    status = json.loads(run(get_sub_agent_status, context_for(runtime), display_names=R1))
    assert status[R1]["status"] == RUNNING
    ghost = refused(get_sub_agent_status, context_for(runtime), display_names=["Ghost_1"])
    assert ghost.code == errors.UNKNOWN_AGENT and R1 in str(ghost)


# --- protocols ---------------------------------------------------------------------------------------------------


def test_propose_plan_checks_steps_then_opens_a_plan_request(runtime):
    from teamgraph.tools.protocols import PlanStep

    assert refused(propose_plan, context_for(runtime), summary="S", steps=[]).code == errors.BAD_ARGUMENT
    bad_role = [PlanStep(title="A", role_id="astronaut")]
    assert refused(propose_plan, context_for(runtime), summary="S", steps=bad_role).code == errors.UNKNOWN_ROLE
    forward = [PlanStep(title="A"), PlanStep(title="B", depends_on=[2])]
    assert refused(propose_plan, context_for(runtime), summary="S", steps=forward).code == errors.BAD_ARGUMENT

    steps = [PlanStep(title="A", role_id="researcher"), PlanStep(title="B", depends_on=[1])]
    [opened] = effects_of(run(propose_plan, context_for(runtime), summary="S", steps=steps, complexity="simple"))
    assert (opened["request_kind"], opened["tool"], opened["details"]["complexity"]) == (PLAN, "propose_plan", "simple")
    assert [s["depends_on"] for s in opened["details"]["steps"]] == [[], [1]]


def test_shutdown_request_names_the_id_the_router_will_give(runtime):
    context = context_for(
        runtime, team={"counters": {COUNTER: 3}}, effects=[effects.open_request(request_kind=ASK, body="?")]
    )

    out = run(shutdown_request, context, display_name=R1, reason="Done.")
    [opened] = effects_of(out)
    assert (opened["request_kind"], opened["to"]) == (SHUTDOWN, R1)
    assert "shutdown_5" in result_of(out).content


def test_review_plan_and_shutdown_response_decide_once(runtime):
    plan = request("member_plan_2", MEMBER_PLAN, R1, LEADER)
    [answer] = effects_of(
        run(review_plan, context_for(runtime, requests=[plan]), request_id="member_plan_2", approve=True)
    )
    assert (answer["request_id"], answer["approve"]) == ("member_plan_2", True)
    twice = context_for(runtime, requests=[plan], effects=[answer])
    assert refused(review_plan, twice, request_id="member_plan_2", approve=False).code == errors.ALREADY_ANSWERED

    shutdown = request("shutdown_4", SHUTDOWN, LEADER, R1)
    member = context_for(runtime, R1, requests=[shutdown])
    no_reason = refused(shutdown_response, member, request_id="shutdown_4", approve=False)
    assert no_reason.code == errors.BAD_ARGUMENT  # NOTE: a reject needs a reason
    [answer] = effects_of(run(shutdown_response, member, request_id="shutdown_4", approve=False, reason="Busy."))
    assert (answer["approve"], answer["answer"]) == (False, "Busy.")


def test_send_message_types(runtime):
    shout = refused(send_message, context_for(runtime), to=R1, content="x", msg_type="shout")
    assert shout.code == errors.BAD_ARGUMENT and "broadcast" in str(shout)  # NOTE: it lists the types
    sent = effects_of(run(send_message, context_for(runtime, R1), to="*", content="Hi.", msg_type="broadcast"))
    assert [(e["kind"], e["to"]) for e in sent] == [("deliver", R2)]
    shutdown = refused(send_message, context_for(runtime, R1), to=R2, content="x", msg_type="shutdown_request")
    assert shutdown.code == errors.FORBIDDEN
    assert refused(send_message, context_for(runtime), to=LEADER, content="x").code == errors.SELF_ADDRESS


# --- sessions ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [-1, math.inf, math.nan, effects.MAX_WAIT_SECONDS + 1])
def test_sessions_send_refuses_bad_time_outs(runtime, seconds):
    member = context_for(runtime, R1)
    bad = refused(sessions_send, member, sessionKey=R2, message="m", timeoutSeconds=seconds)
    assert bad.code == errors.BAD_ARGUMENT and "timeoutSeconds" in str(bad)


def test_sessions_send_blocks_or_notifies(runtime):
    member = context_for(runtime, R1)

    assert refused(sessions_send, member, sessionKey=R1, message="m").code == errors.SELF_ADDRESS
    assert refused(sessions_send, member, sessionKey=LEADER, message="m").code == errors.WRONG_TOOL
    assert refused(sessions_send, member, sessionKey="Ghost_1", message="m").code == errors.UNKNOWN_AGENT
    [note] = effects_of(run(sessions_send, member, sessionKey=LEADER, message="m", timeoutSeconds=0))
    assert (note["kind"], note["to"]) == ("deliver", LEADER)
    [opened] = effects_of(run(sessions_send, member, sessionKey=R2, message="m", timeoutSeconds=30))
    assert (opened["request_kind"], opened["to"], opened["timeout"], opened["reply_via"]) == (
        QUESTION,
        R2,
        30,
        "output",
    )


def test_sessions_spawn_creates_a_child_of_a_role_or_uses_a_live_session(runtime):
    spawn, opened = effects_of(run(sessions_spawn, context_for(runtime, R1), task="Dig.", agentId="ui-operator"))
    assert (spawn["kind"], spawn["name"], opened["request_kind"], opened["to"]) == (
        "spawn",
        "UI Operator_1",
        RUN,
        spawn["name"],
    )
    [opened] = effects_of(run(sessions_spawn, context_for(runtime, R1), task="Dig.", agentId=R2, runTimeoutSeconds=60))
    assert (opened["to"], opened["timeout"]) == (R2, 60)
    assert refused(sessions_spawn, context_for(runtime, R1), task="Dig.", agentId=LEADER).code == errors.NOT_A_MEMBER
    late = refused(sessions_spawn, context_for(runtime, R1), task="Dig.", runTimeoutSeconds=-5)
    assert late.code == errors.BAD_ARGUMENT


# --- collaboration -----------------------------------------------------------------------------------------------


def test_collaboration_refuses_the_master_yourself_and_files_outside_the_project(runtime):
    member = context_for(runtime, R1)

    assert refused(call_agent, member, receiver=LEADER, content="c").code == errors.NOT_A_MEMBER
    assert refused(call_agent, member, receiver=R1, content="c").code == errors.SELF_ADDRESS
    outside = refused(call_agent, member, receiver=R2, content="c", project_name="p", files=["../../x"])
    assert outside.code == errors.FORBIDDEN
    assert refused(call_agents, member, receivers=[R2, R2], content="c").code == errors.BAD_ARGUMENT
    opened = effects_of(run(call_agents, member, receivers=[R2], content="c", project_name="p", files=["a.md"]))
    assert [(e["request_kind"], e["to"], e["group"]) for e in opened] == [(QUESTION, R2, True)]


def test_assign_agent_work_lands_on_the_board_when_there_is_one(runtime):
    with_board = context_for(runtime, team={"board": []})
    delivered, added = effects_of(run(assign_agent_work, with_board, agent=R1, task="Do it.", task_name="It"))
    assert (delivered["kind"], delivered["to"], delivered["type"]) == ("deliver", R1, "task")
    assert (added["kind"], added["title"], added["assignee"]) == ("board_add", "It", R1)
    assert len(effects_of(run(assign_agent_work, context_for(runtime), agent=R1, task="Do it."))) == 1


# --- tasks, files, skills, admin, commands, teammates ------------------------------------------------------------


def test_a_task_created_earlier_in_the_step_can_be_updated(runtime):
    [created] = effects_of(run(create_task, context_for(runtime), title="Survey", assignee=R1, priority="high"))
    assert (created["kind"], created["assignee"], created["priority"]) == ("task_create", R1, "high")
    later = context_for(runtime, effects=[created])
    [update] = effects_of(run(set_task_status, later, task_id="task_1", status="done"))
    assert (update["kind"], update["task_id"], update["status"]) == ("task_update", "task_1", "done")
    assert refused(set_task_status, context_for(runtime), task_id="task_1", status="done").code == errors.UNKNOWN_TASK
    assert refused(create_task, context_for(runtime), title="X", assignee="Ghost_1").code == errors.UNKNOWN_AGENT


def test_files_stay_in_the_threads_project_folder(runtime):
    context = context_for(runtime, config={"configurable": {"thread_id": "t-7"}})

    run(write_file, context, path="notes/a.md", content="hello")
    assert (runtime.project_dir / "t-7" / "notes" / "a.md").read_text(encoding="utf-8") == "hello"
    assert result_of(run(read_file, context, path="notes/a.md")).content == "hello"
    assert refused(write_file, context, path="../escape.md", content="x").code == errors.FORBIDDEN
    assert refused(read_file, context, path="notes/b.md").code == errors.UNKNOWN_PATH


def test_skills_are_written_read_and_given(runtime):
    run(create_skill, context_for(runtime), name="cite-sources", description="When citing.", body="Cite them.")

    assert "Cite them." in run(read_skill, context_for(runtime), name="cite-sources")
    [endow] = effects_of(
        run(endow_skills, context_for(runtime), agent_or_role="researcher", skill_names=["cite-sources"])
    )
    assert (endow["kind"], endow["target"], [s["name"] for s in endow["skills"]]) == (
        "endow",
        "researcher",
        ["cite-sources"],
    )
    ghost = refused(endow_skills, context_for(runtime), agent_or_role="Ghost_1", skill_names=["cite-sources"])
    assert ghost.code == errors.UNKNOWN_AGENT
    assert refused(read_skill, context_for(runtime), name="no-such-skill").code == errors.UNKNOWN_SKILL
    assert refused(read_skill, context_for(runtime), name="Not A Name").code == errors.BAD_ARGUMENT


def test_admin_and_commands_use_the_runtime_from_the_context(runtime):
    assert json.loads(run(get_agent_config, context_for(runtime), role_id="researcher"))["level"]
    assert refused(get_agent_config, context_for(runtime), role_id="astronaut").code == errors.UNKNOWN_ROLE
    context = context_for(runtime, R1, config={"configurable": {"thread_id": "t-8"}})
    out = run(run_command, context, command='python -c "print(6 * 7)"', timeout=30)
    assert "42" in out


def test_spawn_teammate_does_what_create_sub_agent_does(runtime):
    assert (
        run(spawn_teammate, context_for(runtime), role="researcher", prompt="Go.").update
        == run(create_sub_agent, context_for(runtime), role_id="researcher", task="Go.").update
    )


def test_roles_pick_their_side_of_a_tool_set(runtime):
    member_role: Role = runtime.roles["researcher"]
    names = {t.name for t in TOOL_SET_FACTORIES["protocols"](runtime, member_role)}
    assert "submit_plan" in names and "propose_plan" not in names
