"""Protocol fidelity (issue 16): the words, fields and rules of the specs, one test per point.

Envelopes (layout, ids, one message per envelope), the control words contained in a
text, the sessions request template and errors, the shutdown protocol's ids and status
fields, the ``teammates`` aliases, and the Team Leader prompt's sections. Tests that need
a router call site (teamgraph/graph/router.py) are marked ``xfail(strict=True)`` until the
router uses the functions they name.
"""

from __future__ import annotations

import json

import pytest
from fidelity_fixtures import env, envelopes_in, parsed, received, template_fields
from langchain_core.messages import HumanMessage
from scripting import act, call, quiet

from teamgraph.messaging import envelopes
from teamgraph.messaging.envelopes import (
    ANNOUNCE_SKIP,
    ENVELOPE_KEY,
    REPLY_SKIP,
    has_control_word,
    without_control_words,
)
from teamgraph.tools import TOOL_SET_FACTORIES, tools_for_role
from teamgraph.tools.context import TeamView, ToolContext
from teamgraph.tools.sessions import communication_failed, timed_out, unknown_target
from teamgraph.tools.teammates import TEAMMATE_TOOL_NAMES

LEADER = "Team Leader"
LIAISON, R1, R2, R3 = "Liaison_1", "Researcher_1", "Researcher_2", "Researcher_3"
CREATE_LIAISON_AND_RESEARCHER = act(
    call("create_sub_agent", role_id="liaison", task="Work with the other sessions."),
    call("create_sub_agent", role_id="researcher"),
)
NEEDS_ROUTER = "needs router call site: {}"


# --- envelopes (Team Leader spec: the message formats) ---------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            envelopes.output("UI Operator_1", "out_7", "Analysing the style.", final=False),
            env("Progress", "UI Operator_1", "Output", "Analysing the style.", id="out_7"),
        ),
        (
            envelopes.output("UI Operator_1", "out_8", "Done.", final=True),
            env("Result", "UI Operator_1", "Output", "Done.", id="out_8"),
        ),
        (envelopes.task(LEADER, "Design the page."), env("Task", LEADER, "Task", "Design the page.")),
        (envelopes.message(LEADER, "Use blue."), env("Message", LEADER, "Message", "Use blue.")),
        (envelopes.reply(R1, "ask_2", "Yes.", late=True), env("Late reply", R1, "Reply", "Yes.", to="ask_2")),
    ],
    ids=["progress", "result", "task", "message", "late-reply"],
)
def test_every_envelope_reads_back_into_its_fields(text, expected):
    assert parsed(text) == expected


def test_an_envelope_has_its_id_and_its_tags_on_lines_of_their_own_and_no_blank_line():
    question = envelopes.request("ask", "Full-Stack Engineer_1", "ask_3", "JWT or session cookies?\nOr both?")

    lines = question.split("\n")
    assert lines[:2] == ["Question from Full-Stack Engineer_1", "id: ask_3"]
    assert lines[3:] == [
        "<Full-Stack Engineer_1>",
        "<Ask>",
        "JWT or session cookies?",
        "Or both?",
        "</Ask>",
        "</Full-Stack Engineer_1>",
    ]
    assert "answer_sub_agent_question" in parsed(question)["fields"]["respond"]
    assert "\n\n" not in question
    assert envelopes.parse("Notice · Researcher_1 finished.") is None


def test_as_messages_gives_one_user_message_per_envelope_and_as_message_still_batches():
    texts = [envelopes.output("A_1", "out_1", "One.", final=True), envelopes.output("B_1", "out_2", "Two.", final=True)]

    messages = envelopes.as_messages(texts)

    assert [parsed(m.content)["fields"]["id"] for m in messages] == ["out_1", "out_2"]
    assert all(isinstance(m, HumanMessage) and m.additional_kwargs == {ENVELOPE_KEY: "inbox"} for m in messages)
    assert envelopes.as_message(texts).content.split("\n\n") == texts


def test_the_leader_gets_one_message_per_output_so_it_sees_every_id(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="researcher", task="A."),
                    call("create_sub_agent", role_id="ui-operator", task="B."),
                ),
                *quiet(),
            ],
            R1: ["A done."],
            "UI Operator_1": ["B done."],
        }
    )

    outputs = [m for m in run.history(LEADER) if isinstance(m, HumanMessage) and envelopes.parse(str(m.content))]
    assert sorted(parsed(str(m.content))["fields"]["id"] for m in outputs) == ["out_1", "out_2"]


# --- control words (sessions spec: contained in the body) -------------------------------------


def test_control_words_are_found_inside_a_text_as_words_of_their_own():
    assert has_control_word("Thanks, that is all. REPLY_SKIP", REPLY_SKIP)
    assert has_control_word("ANNOUNCE_SKIP\nnothing to report", ANNOUNCE_SKIP)
    assert not has_control_word("Thanks, that is all. REPLY_SKIP", ANNOUNCE_SKIP)
    assert not has_control_word("REPLY_SKIPPED and NO_REPLY_SKIP are ordinary words", REPLY_SKIP)
    assert without_control_words("Thanks, that is all. REPLY_SKIP") == "Thanks, that is all."
    assert without_control_words("REPLY_SKIP") == ""
    assert without_control_words("Line one.\nANNOUNCE_SKIP\nLine two.") == "Line one.\nLine two."


def test_a_reply_that_contains_reply_skip_ends_the_ping_pong(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [
                act(call("sessions_send", sessionKey=R1, message="Shall we use REST?")),
                "Thanks, that is all. REPLY_SKIP",
                *["(spare)"] * 3,
            ],
            R1: ["Yes, REST.", *["(spare)"] * 3],
        }
    )
    run.send("Go")

    assert [e["tag"] for e in envelopes_in(run, R1)] == ["Ask"]  # no round 2
    assert run.values["team"].get("conversations", {}) == {}


def test_a_run_result_that_contains_announce_skip_is_not_announced(clocked_team):
    run = clocked_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="liaison", task="Delegate the clean-up.")), *quiet()],
            LIAISON: [act(call("sessions_spawn", task="Delete the temp files.")), "Delegated.", "(spare)"],
            "Liaison_2": ["Temp files deleted. ANNOUNCE_SKIP"],
        }
    )
    run.send("Go")

    assert run.request("run_1")["status"] == "answered"
    assert not any(e["sender"] == "Liaison_2" for e in envelopes_in(run, LIAISON) + envelopes_in(run, LEADER))


def test_the_leader_takes_part_in_a_ping_pong_it_started(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("sessions_send", sessionKey=R1, message="REST or GraphQL?")),
                "And for the admin API?",
                *quiet(),
            ],
            R1: ["REST.", "REST too. REPLY_SKIP", "(spare)"],
        }
    )
    run.send("Go")

    assert run.tool_result(LEADER, "sessions_send") == "Researcher_1 replied (out_1):\nREST."
    [question, round_2] = envelopes_in(run, R1)
    assert (question["title"], question["fields"]["id"]) == ("Question", "ask_1")
    assert (round_2["title"], round_2["sender"], round_2["fields"]["to"], round_2["body"]) == (
        "Reply",
        LEADER,
        "ask_1",
        "And for the admin API?",
    )
    # The member's REPLY_SKIP ended it: nothing more is forwarded, and the leader's round-2 text was not a user reply.
    assert run.values["team"].get("conversations", {}) == {}
    assert "And for the admin API?" not in run.user_replies()


# --- sessions: the request template and the errors ---------------------------------------------


def test_a_sessions_send_carries_every_field_of_the_request_template(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [
                act(
                    call(
                        "sessions_send",
                        sessionKey=R1,
                        message="Which endpoints are slow?",
                        timeoutSeconds=60,
                        purpose="knowledge query",
                        userRequest="Make the API faster",
                        contextSummary="We profile /search first.",
                    )
                ),
                "REPLY_SKIP",
                "(spare)",
            ],
            R1: ["/search and /export."],
        }
    )
    run.send("Go")

    [question] = received(run, R1)
    assert (question["title"], question["sender"], question["fields"]["id"]) == ("Question", LIAISON, "ask_1")
    assert question["body"] == {
        "sender": "Liaison_1 (liaison)",
        "receiver": R1,
        "source sessionKey": LIAISON,
        "purpose": "knowledge query",
        "expected response": "blocking",
        "timeout": "60",
        "user request": "Make the API faster",
        "message": "Which endpoints are slow?",
        "context summary": "We profile /search first.",
    }
    assert run.request("ask_1")["details"]["timeout"] == 60


def test_the_sessions_errors_carry_the_target_the_alternatives_and_what_to_do():
    unknown = unknown_target("Researcher_9", [LEADER, R1])
    assert unknown.splitlines()[0] == 'Target agent "Researcher_9" does not exist or is unavailable.'
    assert [line for line in unknown.splitlines() if line.startswith("- ")] == [f"- {LEADER}", f"- {R1}"]
    assert "sessions_list" in unknown.splitlines()[-1]

    late = timed_out(R1, "ask_4", 120)
    assert (
        f'"{R1}"' in late.splitlines()[0] and "120 seconds" in late.splitlines()[0] and "ask_4" in late.splitlines()[0]
    )
    assert [line[:2] for line in late.splitlines() if line[:1].isdigit()] == [
        "1.",
        "2.",
        "1.",
        "2.",
    ]  # causes, suggestions
    assert "sessions_spawn" in late

    failed = communication_failed(R1, "Researcher_1 is failed and did not answer.")
    assert failed.splitlines()[:2] == [
        f'Communication with target agent "{R1}" failed.',
        "Error: Researcher_1 is failed and did not answer.",
    ]
    assert "sessions_spawn" in failed.splitlines()[-1]


def test_a_sessions_send_whose_target_fails_gets_communication_failed(clocked_team):
    def provider_down(messages):
        raise RuntimeError("provider down")

    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [act(call("sessions_send", sessionKey=R1, message="Check the logs.")), "Will check them myself."],
            R1: [provider_down],
        }
    )
    run.send("Go")

    assert run.tool_result(LIAISON, "sessions_send") == communication_failed(
        R1, "Researcher_1 is failed and did not answer."
    )


# --- shutdown and plans (team protocols) --------------------------------------------------------


def test_shutdown_request_names_the_request_id_the_router_gives_even_next_to_other_requests(hitl_team):
    spare = ["Done."] * 6
    run = hitl_team(
        {
            LEADER: [
                act(*(call("create_sub_agent", role_id="researcher", task=f"Part {n}.") for n in (1, 2, 3))),
                act(
                    call("shutdown_request", display_name=R1), call("shutdown_request", display_name=R2, reason="Done.")
                ),
                act(call("shutdown_request", display_name=R3)),
                *quiet(),
            ],
            R1: [act(call("list_files")), *spare],
            R2: [act(call("list_files")), *spare],
            # In the same superstep as the leader's first two shutdown requests, R3 asks.
            R3: [act(call("ask_master", question="Which database?")), *spare],
        }
    )
    run.send("Go")

    texts = run.tool_texts(LEADER, "shutdown_request")
    assert texts == [
        "Shutdown request shutdown_1 sent to 'Researcher_1' (status: pending)",
        "Shutdown request shutdown_2 sent to 'Researcher_2' (status: pending)",
        "Shutdown request shutdown_4 sent to 'Researcher_3' (status: pending)",
    ]
    requests = run.requests()
    assert {rid: (r["kind"], r["to"]) for rid, r in requests.items()} == {
        "shutdown_1": ("shutdown", R1),
        "shutdown_2": ("shutdown", R2),
        "ask_3": ("ask", LEADER),
        "shutdown_4": ("shutdown", R3),
    }


def test_a_submitted_plan_returns_its_request_id_at_once(hitl_team, tmp_path):
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "crew.md").write_text(CREW_ROLE, encoding="utf-8")
    run = hitl_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="crew", task="Plan, then build.")), *quiet()],
            "Crew_1": [act(call("submit_plan", plan="1. Build app.py")), "Waiting.", "(spare)"],
        },
        roles_dir=roles,
    )
    run.send("Go")

    assert (
        run.tool_result("Crew_1", "submit_plan")
        == "Plan submitted (request_id=member_plan_1). Waiting for lead approval."
    )


# --- the teammates tool set (agent-teams names) --------------------------------------------------

CREW_ROLE = """---
id: crew
name: Crew
description: A member with the agent-teams tool names.
tools: [member, files, protocols, teammates]
---

You build what the lead asks, after your plan is approved.
"""


def test_teammates_is_a_tool_set_with_the_agent_teams_names(clocked_team, tmp_path):
    runtime = clocked_team({}).team.runtime
    leader = {t.name for t in TOOL_SET_FACTORIES["teammates"](runtime, runtime.roles["team-leader"])}
    member = {t.name for t in TOOL_SET_FACTORIES["teammates"](runtime, runtime.roles["researcher"])}

    assert leader == set(TEAMMATE_TOOL_NAMES)
    assert member == set(TEAMMATE_TOOL_NAMES) - {"spawn_teammate"}


def _view(**parts) -> TeamView:
    base = {"caller": LEADER, "agents": {}, "requests": {}, "team": {}}
    return TeamView(**{**base, **parts})


def test_leader_aliases_do_what_the_tools_they_alias_do(clocked_team):
    runtime = clocked_team({}).team.runtime
    leader_role = runtime.roles["team-leader"]
    tools = {t.name: t for t in tools_for_role(runtime, leader_role)}
    aliases = {t.name: t for t in TOOL_SET_FACTORIES["teammates"](runtime, leader_role)}
    agents = {
        LEADER: {"role": "team-leader", "status": "running", "inbox": []},
        R1: {"role": "researcher", "status": "idle", "inbox": []},
    }
    plan = {"id": "member_plan_1", "kind": "member_plan", "from": R1, "route": LEADER, "status": "pending"}
    view = _view(agents=agents, requests={"member_plan_1": plan})
    context = ToolContext(view=view, runtime=runtime, tool_call_id="c1")

    def run(tool, **args):
        return tool.func(context=context, **args)

    assert run(aliases["spawn_teammate"], role="researcher", prompt="Survey.") == run(
        tools["create_sub_agent"], role_id="researcher", task="Survey."
    )
    assert run(aliases["plan_approval"], request_id="member_plan_1", approve=False, feedback="Smaller.") == run(
        tools["review_plan"], request_id="member_plan_1", approve=False, feedback="Smaller."
    )
    assert run(aliases["broadcast"], content="Stand-up.") == run(
        tools["send_message"], to="*", content="Stand-up.", msg_type="broadcast"
    )
    assert aliases["list_teammates"].func(context=context) == tools["sessions_list"].func(context=context)
    assert json.loads(aliases["read_inbox"].func(context=context)) == []


def test_a_member_uses_the_teammates_names_end_to_end(hitl_team, tmp_path):
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "crew.md").write_text(CREW_ROLE, encoding="utf-8")
    run = hitl_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="crew", task="Plan, then build."),
                    call("create_sub_agent", role_id="researcher"),
                ),
                "",
                act(call("review_plan", request_id="member_plan_1", approve=True)),
                *quiet(),
            ],
            "Crew_1": [
                act(call("list_teammates"), call("read_inbox"), call("broadcast", content="Starting.")),
                act(call("plan_approval", plan="1. Write app.py")),
                "Waiting for the verdict.",  # NOTE: the plan's id came back at once
                "Built.",
            ],
            R1: ["Noted."],
        },
        roles_dir=roles,
    )
    run.send("Go")

    assert [row["sessionKey"] for row in json.loads(run.tool_result("Crew_1", "list_teammates"))] == [
        LEADER,
        "Crew_1",
        R1,
    ]
    assert json.loads(run.tool_result("Crew_1", "read_inbox")) == []
    assert envelopes_in(run, R1) == [env("Message", "Crew_1", "Message", "Starting.")]
    record = run.request("member_plan_1")
    assert (record["kind"], record["from"], record["tool"], record["status"]) == (
        "member_plan",
        "Crew_1",
        "submit_plan",
        "approved",
    )
    assert "member_plan_1" in run.tool_result("Crew_1", "plan_approval")


# --- the Team Leader prompt ----------------------------------------------------------------------

LEADER_PROMPT_SECTIONS = {
    # section (docs/protocols.md, "The Team Leader's prompt") -> words that must be in it
    "persona": ["plain language", "technical detail", "partner"],
    "your role": ["strategist", "supervise"],
    "do it yourself vs delegate": ["Delegate by default", "Save your context", "read_file", "write_file"],
    "budget by complexity": ["3-10 tool calls", "10-15 tool calls"],
    "every delegation states": [
        "Objective",
        "Output format",
        "Tools and scope",
        "Boundaries",
        "Context",
        "Bad:",
        "Good:",
    ],
    "working principles": ["you are their user", "Broad first, then narrow", "short", "ask_sub_agent"],
    "honesty": [
        "own knowledge",
        "official",
        "third party",
        "certain",
        "not verified",
        "permission",
        "defects",
        "suspect your own",
    ],
    # leader spec's output formats: file links and citations (issue 33; the CLI renders them)
    "report formats": ["download://", "<show_file path=", "【cite:src_", "【file:", "never invent"],
    "while members work": ["do not poll", "sleep", "end your turn with no text"],
    "failure modes": ["Role reversal", "Instruction echo", "Vague answers", "Loops"],
    "converge": ["terminate_sub_agent", "2-3 members"],
    "tools": [
        "create_sub_agent",
        "terminate_sub_agent",
        "ask_sub_agent",
        "create_custom_agent",
        "get_sub_agent_status",
    ],
    "messages you receive": ["id: out_", "id: ask_", "answer_sub_agent_question"],
    "display names": ["Team Leader", "{Role Name}_{n}"],
    "communication rules": ["inline", "tool result", "envelope"],
    "team visibility": ["ask_other_agent", "report to you"],
}


def test_the_leader_prompt_has_every_section_of_the_team_leader_spec(clocked_team):
    from teamgraph.roles.prompts import LEADER_SECTIONS, leader_prompt

    runtime = clocked_team({}).team.runtime
    prompt = leader_prompt(runtime.roles["team-leader"], roles=runtime.roles, agents={}, pending=[], team={})

    assert [key for key, _, _ in LEADER_SECTIONS] == list(LEADER_PROMPT_SECTIONS)
    for key, title, text in LEADER_SECTIONS:
        assert title in prompt, key
        for words in LEADER_PROMPT_SECTIONS[key]:
            assert words.lower() in text.lower(), (key, words)


def test_template_fields_reads_a_request_back():
    # The helper the sessions tests rely on reads what request_message writes.
    from teamgraph.tools.sessions import request_message

    view = _view(caller=LIAISON, agents={LIAISON: {"role": "liaison", "status": "running"}})
    text = request_message(view, R1, "Line one.\nLine two.", timeout=0)
    assert template_fields(text)["message"] == "Line one.\nLine two."
    assert template_fields(text)["expected response"] == "fire-and-forget"
