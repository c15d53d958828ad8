"""Scenario tests of the leader's tools, run through ``graph.invoke``.

Each scenario is a ScriptedChatModel script: an agent's turn index is the number of AI
messages already in its history. The members' and file tools are in
``test_member_tools.py``; what an agent sees when it calls a tool badly, and role
files' errors, in ``test_tool_misuse.py``.
"""

from __future__ import annotations

import json

from fidelity_fixtures import env, envelopes_in, parsed
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, ToolMessage
from scripting import act, call, error_codes, reply_when_done, types

from teamgraph.messaging import notices
from teamgraph.messaging.envelopes import ENVELOPE_KEY
from teamgraph.tools import errors

LEADER = "Team Leader"
BUILTIN_MEMBER_ROLES = {
    "ui-operator",
    "full-stack-engineer",
    "code-reviewer",
    "researcher",
    "project-manager",
    "hr-manager",
    "task-manager",
    "skill-teacher",
    "tool-maker",
}


# --- leader tools ---------------------------------------------------------------


def test_create_sub_agent_with_task_starts_the_member_and_its_result_reaches_the_leader(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design the login page.")),
                *reply_when_done("The login page is designed.", "UI Operator_1"),
            ],
            "UI Operator_1": ["Login page designed: web/login.html"],
        },
        user="Build a login page",
    )

    assert run.tool_result(LEADER, "create_sub_agent").startswith("Created UI Operator_1 (UI Operator)")
    member = run.history("UI Operator_1")
    assert types(member) == ["HumanMessage", "AIMessage"]
    assert parsed(member[0].content) == env("Task", LEADER, "Task", "Design the login page.")
    assert env("Result", "UI Operator_1", "Output", "Login page designed: web/login.html", id="out_1") in envelopes_in(
        run, LEADER
    )
    record = run.agents()["UI Operator_1"]
    assert (record["role"], record["status"], record["created_by"]) == ("ui-operator", "idle", LEADER)
    assert run.user_replies() == ["The login page is designed."]


def test_create_sub_agent_without_task_leaves_the_member_idle_until_messaged(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("get_sub_agent_status", display_names="Researcher_1")),
                act(call("send_message_to_sub_agent", display_name="Researcher_1", message="Compare A and B.")),
                "",
                "Done.",
            ],
            "Researcher_1": ["A is faster than B."],
        }
    )

    assert "idle until you message it" in run.tool_result(LEADER, "create_sub_agent")
    status = json.loads(run.tool_result(LEADER, "get_sub_agent_status"))
    assert status["Researcher_1"]["status"] == "idle"
    assert status["Researcher_1"]["steps"] == 0
    # Its first turn starts with the message, not with an (absent) task.
    history = run.history("Researcher_1")
    assert types(history) == ["HumanMessage", "AIMessage"]
    assert parsed(history[0].content) == env("Message", LEADER, "Message", "Compare A and B.")
    assert run.agents()["Researcher_1"]["turn"] == 1


def test_terminate_sub_agent_ends_the_member_for_good(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher"), call("create_sub_agent", role_id="ui-operator")),
                act(call("terminate_sub_agent", display_name="Researcher_1")),
                act(
                    call("list_active_sub_agents"),
                    call("send_message_to_sub_agent", display_name="Researcher_1", message="Are you there?"),
                    call("terminate_sub_agent", display_name="Researcher_1"),
                    call("get_sub_agent_status", display_names="Researcher_1"),
                ),
                "Done.",
            ],
        }
    )

    assert run.tool_result(LEADER, "terminate_sub_agent") == "Researcher_1 is terminated."
    assert run.status("Researcher_1") == "terminated"
    active = json.loads(run.tool_result(LEADER, "list_active_sub_agents"))
    assert [row["display_name"] for row in active] == ["UI Operator_1"]
    assert error_codes(run, LEADER, "send_message_to_sub_agent") == [errors.AGENT_ENDED]
    assert "UI Operator_1" in run.tool_result(LEADER, "send_message_to_sub_agent")  # NOTE: it lists who is active
    assert error_codes(run, LEADER, "terminate_sub_agent") == [errors.AGENT_ENDED]
    assert json.loads(run.tool_result(LEADER, "get_sub_agent_status"))["Researcher_1"]["status"] == "terminated"
    # Nothing reached the terminated member.
    assert run.history("Researcher_1") == []
    assert run.user_replies() == ["Done."]


def test_stop_sub_agent_ends_the_turn_and_the_member_keeps_its_context(run_team):
    seen: list[list] = []

    def after_stop(messages):
        seen.append(list(messages))
        return "Resumed with the footer."

    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Build the whole site.")),
                act(call("stop_sub_agent", display_name="UI Operator_1")),
                act(call("get_sub_agent_status", display_names=["UI Operator_1"])),
                act(call("send_message_to_sub_agent", display_name="UI Operator_1", message="Only do the footer.")),
                "",
                "Footer done.",
            ],
            "UI Operator_1": [act(call("list_files")), after_stop],
        }
    )

    assert "stopped" in run.tool_result(LEADER, "stop_sub_agent")
    status = json.loads(run.tool_result(LEADER, "get_sub_agent_status"))["UI Operator_1"]
    assert status["status"] == "stopped"
    history = run.history("UI Operator_1")
    texts = [str(m.content) for m in history]
    kinds = [m.additional_kwargs.get(ENVELOPE_KEY) for m in history]
    stop_notice = kinds.index(f"notice:{notices.STOPPED}")
    assert LEADER in texts[stop_notice]
    # The stop lands after the tool result of the step it interrupted...
    assert isinstance(history[stop_notice - 1], ToolMessage)
    # ...and the member was not called again until the leader's new message.
    assert [type(m).__name__ for m in history[stop_notice + 1 :]] == ["HumanMessage", "AIMessage"]
    assert "Only do the footer." in texts[stop_notice + 1]
    # The resumed turn sees everything before the stop (its context is kept).
    assert len(seen) == 1
    assert "Build the whole site." in str(seen[0][1].content)
    assert run.agents()["UI Operator_1"]["turn"] == 2
    assert run.status("UI Operator_1") == "idle"


def test_send_message_to_sub_agent_wraps_the_body_in_a_message_envelope(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("send_message_to_sub_agent", display_name="Researcher_1", message="Use sources from 2024.")),
                "",
                "ok",
            ],
            "Researcher_1": ["Noted."],
        }
    )
    assert run.tool_result(LEADER, "send_message_to_sub_agent") == "Message sent to Researcher_1."
    assert envelopes_in(run, "Researcher_1") == [env("Message", LEADER, "Message", "Use sources from 2024.")]
    assert len(run.inbox_texts("Researcher_1")) == 1


def test_ask_sub_agent_blocks_one_round_and_the_member_reply_is_the_result(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator")),
                act(call("ask_sub_agent", display_name="UI Operator_1", question="Which colour for the button?")),
                "The button will be indigo.",
            ],
            "UI Operator_1": ["Indigo #4F46E5."],
        }
    )

    leader = run.history(LEADER)
    ask = next(
        i
        for i, m in enumerate(leader)
        if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["name"] == "ask_sub_agent"
    )
    # The leader made no model call in between: the reply is the next message.
    assert isinstance(leader[ask + 1], ToolMessage)
    assert leader[ask + 1].tool_call_id == leader[ask].tool_calls[0]["id"]
    assert "Indigo #4F46E5." in leader[ask + 1].content
    assert "UI Operator_1" in leader[ask + 1].content
    # The reply arrives once: as the tool result, not again as a Result envelope.
    assert not any(e["sender"] == "UI Operator_1" and e["title"] == "Result" for e in envelopes_in(run, LEADER))
    question = parsed(run.inbox_texts("UI Operator_1")[0])
    assert (question["title"], question["sender"], question["fields"]["id"], question["tag"], question["body"]) == (
        "Question",
        LEADER,
        "ask_1",
        "Ask",
        "Which colour for the button?",
    )
    request = run.requests()["ask_1"]
    assert (request["from"], request["to"], request["status"]) == (LEADER, "UI Operator_1", "answered")
    assert run.user_replies() == ["The button will be indigo."]


def test_ask_master_and_answer_sub_agent_question(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="full-stack-engineer", task="Build the auth API.")),
                "",
                act(call("answer_sub_agent_question", question_id="ask_1", answer="Use JWT access tokens.")),
                "",
                "Auth API built with JWT.",
            ],
            "Full-Stack Engineer_1": [
                act(call("ask_master", question="JWT or session cookies?")),
                "Auth API done with JWT.",
            ],
        }
    )

    question = next(e for e in envelopes_in(run, LEADER) if e["tag"] == "Ask")
    assert (question["title"], question["sender"], question["fields"]["id"], question["body"]) == (
        "Question",
        "Full-Stack Engineer_1",
        "ask_1",
        "JWT or session cookies?",
    )
    assert "answer_sub_agent_question" in question["fields"]["respond"]
    assert run.tool_result(LEADER, "answer_sub_agent_question") == "Answered ask_1 (Full-Stack Engineer_1)."
    assert "Use JWT access tokens." in run.tool_result("Full-Stack Engineer_1", "ask_master")
    request = run.requests()["ask_1"]
    assert request["status"] == "answered"
    assert "Use JWT access tokens." in request["answer"]
    assert (request["from"], request["to"]) == ("Full-Stack Engineer_1", LEADER)
    member = run.history("Full-Stack Engineer_1")
    assert types(member) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert run.status("Full-Stack Engineer_1") == "idle"


def test_get_sub_agent_status_shows_a_member_waiting_on_its_question(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design it.")),
                "",
                act(call("get_sub_agent_status", display_names=["UI Operator_1"])),
                act(call("answer_sub_agent_question", question_id="ask_1", answer="Blue.")),
                "",
                "Done.",
            ],
            "UI Operator_1": [act(call("ask_master", question="Colour?")), "Designed in blue."],
        }
    )
    status = json.loads(run.tool_result(LEADER, "get_sub_agent_status"))
    assert set(status) == {"UI Operator_1"}
    row = status["UI Operator_1"]
    assert row["status"] == "waiting"
    assert row["role_id"] == "ui-operator"
    assert row["waiting_for"] == ["ask_1"]


def test_list_agents_lists_every_member_role_but_not_the_leader(run_team):
    run = run_team({LEADER: [act(call("list_agents")), "Listed."]})
    rows = json.loads(run.tool_result(LEADER, "list_agents"))
    ids = {row["role_id"] for row in rows}
    assert ids == BUILTIN_MEMBER_ROLES
    ui = next(row for row in rows if row["role_id"] == "ui-operator")
    assert ui["name"] == "UI Operator"
    assert ui["description"]


def test_list_active_sub_agents_with_and_without_members(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("list_active_sub_agents")),
                act(
                    call("create_sub_agent", role_id="ui-operator"),
                    call("create_sub_agent", role_id="researcher", task="Look into X."),
                ),
                act(call("list_active_sub_agents")),
                "",
                "ok",
            ],
            "Researcher_1": [act(call("list_files")), "X looked into."],
        }
    )
    first, second = run.tool_results(LEADER, "list_active_sub_agents")
    assert first.content == "No active members."
    rows = json.loads(second.content)
    assert [(r["display_name"], r["role_id"]) for r in rows] == [
        ("UI Operator_1", "ui-operator"),
        ("Researcher_1", "researcher"),
    ]
    assert {r["display_name"]: r["status"] for r in rows} == {"UI Operator_1": "idle", "Researcher_1": "running"}


def test_sleep_returns_the_member_next_output_and_does_not_wait_on_idle_members(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="researcher", task="Research X."),
                    call("create_sub_agent", role_id="ui-operator"),
                ),
                act(call("sleep", wait_sub_agent_output="Researcher_1")),
                act(call("sleep", wait_sub_agent_output="UI Operator_1")),
                "X researched.",
            ],
            "Researcher_1": [act(call("list_files")), act(call("list_files")), "X is well documented."],
        }
    )
    woke, idle = run.tool_results(LEADER, "sleep")
    assert "Researcher_1" in woke.content and "X is well documented." in woke.content
    assert "UI Operator_1 is idle" in idle.content
    # The output woke the sleep; it is not delivered a second time.
    assert not any("X is well documented." in t for t in run.inbox_texts(LEADER))
    assert run.user_replies() == ["X researched."]


class MetadataRecorder(BaseCallbackHandler):
    """Records the metadata of every chat model call."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    def on_chat_model_start(self, serialized, messages, *, metadata=None, **kwargs):
        self.seen.append(dict(metadata or {}))


def test_sleep_wakes_when_the_member_asks_a_question_instead(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                act(call("sleep", wait_sub_agent_output="UI Operator_1")),
                act(call("answer_sub_agent_question", question_id="ask_1", answer="Blue.")),
                *reply_when_done("Designed.", "UI Operator_1"),
            ],
            "UI Operator_1": [
                act(call("list_files")),
                act(call("ask_master", question="Which colour?")),
                "Designed in blue.",
            ],
        }
    )
    woke = run.tool_result(LEADER, "sleep")
    assert "ask_1" in woke and "Which colour?" in woke
    assert run.tool_results(LEADER, "answer_sub_agent_question")[0].status != "error"
    assert "Blue." in run.tool_result("UI Operator_1", "ask_master")
    assert run.user_replies() == ["Designed."]


def test_ask_sub_agent_can_be_answered_with_answer_other_agent(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("ask_sub_agent", display_name="Researcher_1", question="Best font?")),
                *reply_when_done("Inter it is.", "Researcher_1"),
            ],
            "Researcher_1": [
                act(call("answer_other_agent", question_id="ask_1", answer="Inter.")),
                "Answered the font question.",
            ],
        }
    )
    assert "Inter." in run.tool_result(LEADER, "ask_sub_agent")
    assert run.tool_result("Researcher_1", "answer_other_agent") == "Answered ask_1 (Team Leader)."
    assert run.requests()["ask_1"]["status"] == "answered"
    assert run.user_replies() == ["Inter it is."]


def test_member_text_next_to_tool_calls_reaches_the_leader_as_progress(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                *reply_when_done("Designed.", "UI Operator_1"),
            ],
            "UI Operator_1": [
                act(call("list_files"), content="Looking at the existing files first."),
                "Designed the page.",
            ],
        }
    )
    outputs = [e for e in envelopes_in(run, LEADER) if e["tag"] == "Output"]
    assert outputs == [
        env("Progress", "UI Operator_1", "Output", "Looking at the existing files first.", id="out_1"),
        env("Result", "UI Operator_1", "Output", "Designed the page.", id="out_2"),
    ]
    assert run.user_replies() == ["Designed."]


def test_create_custom_agent_writes_a_role_file_usable_at_once(make_team, team_home):
    prompts: list[str] = []

    def analyst(messages):
        prompts.append(str(messages[0].content))
        return "Revenue grew 12%."

    run = make_team(
        {
            LEADER: [
                act(
                    call(
                        "create_custom_agent",
                        id="data-analyst",
                        name="Data Analyst",
                        description="Analyses tabular data and reports the findings.",
                        prompt="You analyse CSV files and report numbers with their source.",
                        thinking_mode="deep",
                    )
                ),
                act(call("list_agents"), call("create_sub_agent", role_id="data-analyst", task="Analyse sales.csv.")),
                "",
                "Revenue grew 12%.",
            ],
            "Data Analyst_1": [analyst],
        }
    )
    recorder = MetadataRecorder()
    run.send("Analyse the sales", callbacks=[recorder])

    assert "create_sub_agent(role_id='data-analyst')" in run.tool_result(LEADER, "create_custom_agent")
    path = team_home / "roles" / "data-analyst.md"
    assert path.is_file()
    text = path.read_text(encoding="utf-8")
    assert "id: data-analyst" in text and "name: Data Analyst" in text and "thinking_mode: deep" in text
    assert "You analyse CSV files and report numbers with their source." in text
    assert "data-analyst" in {row["role_id"] for row in json.loads(run.tool_result(LEADER, "list_agents"))}
    record = run.agents()["Data Analyst_1"]
    assert (record["role"], record["status"]) == ("data-analyst", "idle")
    assert len(prompts) == 1 and "You analyse CSV files" in prompts[0]
    assert any("Revenue grew 12%." in t for t in run.inbox_texts(LEADER))
    # The member of a role created at run time is labelled like any other.
    analyst_calls = [m for m in recorder.seen if m.get("teamgraph_agent") == "Data Analyst_1"]
    assert [m.get("teamgraph_role") for m in analyst_calls] == ["data-analyst"]


def test_create_custom_agent_refuses_an_invalid_role_and_the_leader_goes_on(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_custom_agent", id="Data Analyst!", name="Data Analyst", description="d", prompt="p")),
                act(call("create_custom_agent", id="worker", name="Worker_2", description="d", prompt="p")),
                "Could not create the role.",
            ]
        }
    )
    assert error_codes(run, LEADER, "create_custom_agent") == [errors.BAD_ARGUMENT] * 2
    bad_id, bad_name = (str(m.content) for m in run.tool_results(LEADER, "create_custom_agent"))
    assert "Data Analyst!" in bad_id  # NOTE: it names the value to fix
    assert "name" in bad_name  # NOTE: it names the field to fix
    roles = run.team.home / "roles"
    assert not roles.exists() or not list(roles.glob("*.md"))
    assert set(run.team.roles) == {"team-leader", *BUILTIN_MEMBER_ROLES}
    assert run.user_replies() == ["Could not create the role."]
