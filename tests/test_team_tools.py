"""Scenario tests of the team's tools, run through ``graph.invoke``.

Every leader tool, every member tool, the file tools, and what an agent sees when
it calls a tool badly. Each scenario is a ScriptedChatModel script: an agent's
turn index is the number of AI messages already in its history.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fidelity_fixtures import env, envelopes_in, parsed
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from scripting import act, call, error_codes, errors_of, reply_when_done, types

from teamgraph import RoleFileError, ScriptedChatModel, Team
from teamgraph.messaging import notices
from teamgraph.messaging.envelopes import ENVELOPE_KEY
from teamgraph.messaging.results import error_of
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


# --- member tools ---------------------------------------------------------------


def test_ask_other_agent_and_answer_other_agent_with_a_notice_to_the_leader(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="Design the login page."),
                    call("create_sub_agent", role_id="ui-operator", task="Design the sign-up page."),
                ),
                *reply_when_done("Both pages done.", "UI Operator_1", "UI Operator_2"),
            ],
            "UI Operator_1": [
                act(call("list_files")),
                act(call("answer_other_agent", question_id="ask_1", answer="Indigo, 8px radius.")),
                "Login page done.",
            ],
            "UI Operator_2": [
                act(call("ask_other_agent", display_name="UI Operator_1", question="Which palette do you use?")),
                "Sign-up page done in indigo.",
            ],
        }
    )

    question = next(e for e in envelopes_in(run, "UI Operator_1") if e["tag"] == "Ask")
    assert (question["title"], question["sender"], question["fields"]["id"], question["body"]) == (
        "Question",
        "UI Operator_2",
        "ask_1",
        "Which palette do you use?",
    )
    assert "answer_other_agent" in question["fields"]["respond"]
    assert run.tool_result("UI Operator_1", "answer_other_agent") == "Answered ask_1 (UI Operator_2)."
    assert "Indigo, 8px radius." in run.tool_result("UI Operator_2", "ask_other_agent")
    request = run.requests()["ask_1"]
    assert (request["from"], request["to"], request["status"]) == ("UI Operator_2", "UI Operator_1", "answered")
    # The leader is told in one line, and only once.
    notices = [
        line
        for text in run.inbox_texts(LEADER)
        for line in text.split("\n")
        if "UI Operator_2 asked UI Operator_1" in line
    ]
    assert len(notices) == 1
    assert "ask_1" in notices[0] and "Which palette do you use?" in notices[0]
    assert run.user_replies() == ["Both pages done."]
    assert run.status("UI Operator_1") == run.status("UI Operator_2") == "idle"


def test_file_tools_work_inside_the_project_folder(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="ui-operator", task="Write the page.")), "", "ok"],
            "UI Operator_1": [
                act(call("write_file", path="site-a/web/login.html", content="<form>login</form>\n")),
                act(
                    call("read_file", path="site-a/web/login.html"),
                    call("list_files", path="site-a"),
                    call("list_files", path="site-a/web"),
                ),
                "Wrote site-a/web/login.html.",
            ],
        }
    )
    project = run.team.runtime.project_folder(run.config)
    assert project == run.team.home / "project" / run.config["configurable"]["thread_id"]
    assert (project / "site-a" / "web" / "login.html").read_text() == "<form>login</form>\n"
    assert "site-a/web/login.html" in run.tool_result("UI Operator_1", "write_file")
    assert run.tool_result("UI Operator_1", "read_file") == "<form>login</form>\n"
    site, web = (str(m.content) for m in run.tool_results("UI Operator_1", "list_files"))
    assert site.splitlines() == ["site-a/web/", "site-a/web/login.html"]
    assert web.splitlines() == ["site-a/web/login.html"]


OUTSIDE_CALLS = [
    call("write_file", path="../escaped.txt", content="x"),
    call("write_file", path="web/../../escaped.txt", content="x"),
    call("write_file", path="/tmp/teamgraph-escaped.txt", content="x"),
    call("read_file", path="../teamgraph.sqlite"),
    call("read_file", path="/etc/passwd"),
    call("list_files", path=".."),
    call("write_file", path="outside_link/escaped.txt", content="x"),
    call("read_file", path="outside_link/secret.txt"),
    call("list_files", path="outside_link"),
]


def test_file_tools_refuse_paths_outside_the_project_folder(make_team, tmp_path):
    run = make_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="ui-operator", task="Try it.")), "", "ok"],
            "UI Operator_1": [act(*OUTSIDE_CALLS), "Could not do it."],
        }
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    project = run.team.runtime.project_folder(run.config)
    if not (project / "outside_link").is_symlink():
        os.symlink(outside, project / "outside_link")
    try:
        run.send("Try to escape")
    finally:
        (project / "outside_link").unlink()

    results = run.tool_results("UI Operator_1")
    assert len(results) == len(OUTSIDE_CALLS)
    assert error_codes(run, "UI Operator_1") == [errors.FORBIDDEN] * len(OUTSIDE_CALLS)
    for tool_call, result in zip(OUTSIDE_CALLS, results, strict=True):
        text = str(result.content)
        assert "top secret" not in text and "root:x" not in text, (tool_call, text)
    assert not (run.team.home / "escaped.txt").exists()
    assert not (outside / "escaped.txt").exists()
    assert not Path("/tmp/teamgraph-escaped.txt").exists()
    # The member went on after the refusals.
    assert run.history("UI Operator_1")[-1].content == "Could not do it."


def test_read_file_of_a_missing_file_says_how_to_find_files(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="researcher", task="Read notes.")), "", "ok"],
            "Researcher_1": [act(call("read_file", path="notes.md")), "No notes."],
        }
    )
    assert error_codes(run, "Researcher_1", "read_file") == [errors.UNKNOWN_PATH]
    assert "list_files" in run.tool_result("Researcher_1", "read_file")  # NOTE: it names the tool that lists them


# --- bad input --------------------------------------------------------------------


def test_unknown_role_is_an_error_that_lists_the_roles(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="wizard", task="Cast a spell.")),
                act(call("create_sub_agent", role_id="team-leader")),
                "No such role.",
            ]
        }
    )
    assert error_codes(run, LEADER, "create_sub_agent") == [errors.UNKNOWN_ROLE] * 2
    wizard = run.tool_result(LEADER, "create_sub_agent")
    listed = wizard.split("Available roles:")[1]
    assert all(role in listed for role in BUILTIN_MEMBER_ROLES)
    assert "team-leader" not in listed
    assert set(run.agents()) == {LEADER}
    assert run.user_replies() == ["No such role."]


@pytest.mark.parametrize(
    "tool_call",
    [
        call("send_message_to_sub_agent", display_name="UI Operator_7", message="hi"),
        call("ask_sub_agent", display_name="UI Operator_7", question="?"),
        call("terminate_sub_agent", display_name="UI Operator_7"),
        call("stop_sub_agent", display_name="UI Operator_7"),
        call("sleep", wait_sub_agent_output="UI Operator_7"),
        call("get_sub_agent_status", display_names=["UI Operator_7"]),
    ],
    ids=lambda c: c["name"],
)
def test_unknown_member_is_an_error_that_lists_the_members(run_team, tool_call):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator"), call("create_sub_agent", role_id="researcher")),
                act(tool_call),
                "Checked.",
            ]
        }
    )
    assert error_codes(run, LEADER, tool_call["name"]) == [errors.UNKNOWN_AGENT]
    result = run.tool_result(LEADER, tool_call["name"])
    assert "UI Operator_7" in result  # NOTE: it names what was wrong
    assert "UI Operator_1" in result and "Researcher_1" in result  # NOTE: it lists the members by name
    assert run.user_replies() == ["Checked."]


def test_addressing_yourself_is_an_error(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="researcher", task="Research."),
                    call("send_message_to_sub_agent", display_name=LEADER, message="note to self"),
                    call("ask_sub_agent", display_name=LEADER, question="?"),
                ),
                "",
                "ok",
            ],
            "Researcher_1": [
                act(call("ask_other_agent", display_name="Researcher_1", question="Am I right?")),
                act(call("ask_other_agent", display_name=LEADER, question="Am I right?")),
                "Researched.",
            ],
        }
    )
    for tool in ("send_message_to_sub_agent", "ask_sub_agent"):
        assert error_codes(run, LEADER, tool) == [errors.SELF_ADDRESS]
    assert error_codes(run, "Researcher_1", "ask_other_agent") == [errors.SELF_ADDRESS, errors.NOT_A_MEMBER]
    assert run.requests() == {}
    assert run.status("Researcher_1") == "idle"


def test_answering_an_unknown_or_answered_question_is_an_error(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="Design."),
                    call("create_sub_agent", role_id="researcher", task="Research."),
                ),
                "",
                act(call("answer_sub_agent_question", question_id="ask_1", answer="Blue.")),
                act(
                    call("answer_sub_agent_question", question_id="ask_1", answer="Red."),
                    call("answer_sub_agent_question", question_id="ask_99", answer="?"),
                ),
                *reply_when_done("Done.", "UI Operator_1", "Researcher_1"),
            ],
            "UI Operator_1": [
                act(call("ask_master", question="Colour?")),
                act(call("answer_other_agent", question_id="ask_1", answer="mine")),
                "Designed in blue.",
            ],
            "Researcher_1": [
                act(call("answer_other_agent", question_id="ask_42", answer="x")),
                "Researched.",
            ],
        }
    )
    assert error_codes(run, LEADER, "answer_sub_agent_question") == [errors.ALREADY_ANSWERED, errors.UNKNOWN_REQUEST]
    # The first answer stands.
    assert "Blue." in run.tool_result("UI Operator_1", "ask_master")
    assert "Red." not in run.tool_result("UI Operator_1", "ask_master")
    assert "Blue." in run.requests()["ask_1"]["answer"]
    # A member cannot answer a question addressed to the leader, nor an unknown one.
    for member in ("UI Operator_1", "Researcher_1"):
        assert error_codes(run, member, "answer_other_agent") == [errors.UNKNOWN_REQUEST]
    assert run.user_replies() == ["Done."]


def test_unknown_question_error_does_not_list_a_question_answered_in_the_same_step(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                "",
                act(
                    call("answer_sub_agent_question", question_id="ask_1", answer="Blue."),
                    call("answer_sub_agent_question", question_id="ask_9", answer="?"),
                ),
                "",
                "Done.",
            ],
            "UI Operator_1": [act(call("ask_master", question="Colour?")), "Designed."],
        }
    )
    assert error_codes(run, LEADER, "answer_sub_agent_question") == [errors.UNKNOWN_REQUEST]
    unknown = run.tool_result(LEADER, "answer_sub_agent_question", 1)
    waiting = unknown.split("Questions waiting for your answer:")[1]
    assert "ask_1" not in waiting, unknown


@pytest.mark.parametrize(
    "tool_call, problem",
    [
        (call("create_sub_agent"), "role_id"),
        (call("create_sub_agent", role_id=["ui-operator"]), "role_id"),
        (call("send_message_to_sub_agent", display_name="UI Operator_1"), "message"),
        (call("get_sub_agent_status", display_names=7), "display_names"),
        (call("answer_sub_agent_question", question_id="ask_1", answer={"text": "Blue"}), "answer"),
        (call("create_custom_agent", id="x", name="X"), "description"),
    ],
    ids=lambda v: v["name"] + ":" + ",".join(v["args"]) if isinstance(v, dict) else "",
)
def test_missing_or_ill_typed_arguments_are_an_error_result_and_the_agent_goes_on(run_team, tool_call, problem):
    run = run_team({LEADER: [act(tool_call), "Recovered."]})
    assert error_codes(run, LEADER, tool_call["name"]) == [errors.INVALID_CALL]
    assert problem in run.tool_result(LEADER, tool_call["name"])  # NOTE: it names the argument to fix
    assert run.user_replies() == ["Recovered."]


def test_member_tool_call_with_missing_arguments_is_an_error_and_the_member_goes_on(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="researcher", task="Write notes.")), "", "ok"],
            "Researcher_1": [
                act(call("write_file", path="notes.md"), call("ask_master")),
                act(call("write_file", path="notes.md", content="notes")),
                "Notes written.",
            ],
        }
    )
    assert error_codes(run, "Researcher_1") == [errors.INVALID_CALL] * 2
    missing = errors_of(run, "Researcher_1")
    assert "content" in missing[0] and "question" in missing[1]
    assert run.requests() == {}
    assert run.history("Researcher_1")[-1].content == "Notes written."
    assert run.status("Researcher_1") == "idle"


def test_malformed_json_tool_arguments_are_an_error_tool_message_and_the_agent_goes_on(run_team):
    run = run_team(
        {
            LEADER: [
                {
                    "content": "Creating the team.",
                    "tool_calls": [
                        {"name": "create_sub_agent", "args": "not json"},
                        {"name": "create_sub_agent", "args": {"role_id": "researcher"}},
                    ],
                },
                act(call("create_sub_agent", role_id="ui-operator")),
                "Team ready.",
            ],
        }
    )
    leader = run.history(LEADER)
    first = next(m for m in leader if isinstance(m, AIMessage) and m.invalid_tool_calls)
    bad_id = first.invalid_tool_calls[0]["id"]
    answers = [m for m in leader if isinstance(m, ToolMessage) and m.tool_call_id == bad_id]
    assert len(answers) == 1
    assert (answers[0].status, error_of(answers[0])) == ("error", errors.INVALID_CALL)
    # The valid call of the same message ran, and the leader went on.
    assert set(run.agents()) == {LEADER, "Researcher_1", "UI Operator_1"}
    assert run.user_replies() == ["Team ready."]


def test_calling_a_tool_the_agent_does_not_have_lists_its_tools(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="researcher", task="Go.")), "", "ok"],
            "Researcher_1": [act(call("create_sub_agent", role_id="researcher")), "Cannot create members."],
        }
    )
    assert error_codes(run, "Researcher_1") == [errors.UNKNOWN_TOOL]
    [error] = errors_of(run, "Researcher_1")
    assert "ask_master" in error and "read_file" in error  # NOTE: it lists the agent's tools
    assert set(run.agents()) == {LEADER, "Researcher_1"}


# --- role files -------------------------------------------------------------------


def _role_file(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_role_file_errors_surface_through_team_roles_dir(tmp_path, team_home):
    roles = tmp_path / "roles"
    bad = _role_file(
        roles,
        "analyst.md",
        "---\nid: analyst\nname: Analyst\ndescription: Analyses.\nthinking_mode: slow\n---\nYou analyse.\n",
    )
    with pytest.raises(RoleFileError) as info:
        Team(model="scripted:unused.yaml", roles_dir=roles, home=team_home)
    message = str(info.value)
    assert str(bad) in message
    assert "thinking_mode" in message and "'slow'" in message
    assert "Fix:" in message and "fast or deep" in message


@pytest.mark.parametrize(
    "text, field, words",
    [
        ("id: analyst\nname: Analyst\n", None, ["front matter"]),
        ("---\nid: analyst\nname: Analyst\ntols: [files]\n---\nx\n", "tols", ["tools"]),
        ("---\nname: Analyst\n---\nx\n", "id", ["missing"]),
        ("---\nid: analyst\nname: Analyst\ntools: [files, magic]\n---\nx\n", "tools", ["magic"]),
        ("---\nid: analyst\nname: Analyst_2\n---\nx\n", "name", ["_<number>"]),
    ],
)
def test_role_file_mistakes_name_the_file_the_field_and_the_fix(tmp_path, team_home, text, field, words):
    path = _role_file(tmp_path / "roles", "analyst.md", text)
    with pytest.raises(RoleFileError) as info:
        Team(model="scripted:unused.yaml", roles_dir=tmp_path / "roles", home=team_home)
    assert info.value.path == str(path)
    assert info.value.field == field
    assert info.value.fix
    for word in words:
        assert word in str(info.value)


def test_roles_dir_that_is_a_file_and_duplicate_ids_are_errors(tmp_path, team_home):
    a_file = _role_file(tmp_path, "not-a-folder.md", "---\nid: a\nname: A\n---\n")
    with pytest.raises(RoleFileError, match="not a folder"):
        Team(model="scripted:unused.yaml", roles_dir=a_file, home=team_home)
    roles = tmp_path / "roles"
    _role_file(roles, "one.md", "---\nid: analyst\nname: Analyst\n---\n")
    _role_file(roles, "two.md", "---\nid: analyst\nname: Other Analyst\n---\n")
    with pytest.raises(RoleFileError) as info:
        Team(model="scripted:unused.yaml", roles_dir=roles, home=team_home)
    assert "two.md" in str(info.value) and "one.md" in str(info.value)


def test_a_broken_role_file_in_the_home_folder_is_reported_but_never_stops_the_team(team_home):
    # NOTE: the home's roles/ folder is the team's own (create_custom_agent writes it):
    # a broken file there is skipped with a warning, the team still compiles.
    _role_file(team_home / "roles", "broken.md", "---\nid: broken\nname: [Broken\n---\n")
    with pytest.warns(RuntimeWarning, match="broken.md"):
        team = Team(model=ScriptedChatModel({}), home=team_home)
    team.compile()
    (problem,) = team.runtime.role_problems.values()
    assert isinstance(problem, RoleFileError) and "line" in str(problem)
    assert "broken" not in team.roles


def test_roles_dir_roles_are_usable_and_override_builtins(run_team, tmp_path):
    roles = tmp_path / "roles"
    _role_file(
        roles,
        "analyst.md",
        "---\nid: analyst\nname: Analyst\ndescription: Analyses data.\n---\nYou are the analyst prompt.\n",
    )
    _role_file(
        roles,
        "researcher.md",
        "---\nid: researcher\nname: Scout\ndescription: Our own researcher.\n---\nYou scout.\n",
    )
    system_prompts: dict[str, str] = {}

    def capture(name):
        def turn(messages):
            assert isinstance(messages[0], SystemMessage)
            system_prompts[name] = str(messages[0].content)
            return f"{name} done."

        return turn

    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="analyst", task="Analyse."),
                    call("create_sub_agent", role_id="researcher", task="Scout."),
                ),
                *reply_when_done("ok", "Analyst_1", "Scout_1"),
            ],
            "Analyst_1": [capture("Analyst_1")],
            "Scout_1": [capture("Scout_1")],
        },
        roles_dir=roles,
    )
    assert set(run.agents()) == {LEADER, "Analyst_1", "Scout_1"}
    assert "You are the analyst prompt." in system_prompts["Analyst_1"]
    assert "You scout." in system_prompts["Scout_1"]
    assert isinstance(run.history("Analyst_1")[0], HumanMessage)


def test_your_own_tools_reach_the_roles_you_name_and_unknown_roles_are_refused(tmp_path):
    from langchain_core.tools import tool

    from teamgraph import ScriptedChatModel

    @tool
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    with pytest.raises(ValueError, match=r"unknown role\(s\) designer.*'\*' for every member"):
        Team(model=ScriptedChatModel({}), home=tmp_path / "bad", tools={"designer": [shout]})
    assert not (tmp_path / "bad").exists()

    script = {
        LEADER: [
            act(call("create_sub_agent", role_id="researcher", task="Shout.")),
            "",
            "Done.",
        ],
        "Researcher_1": [act(call("shout", text="hi")), "Shouted."],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path / "ok", tools={"researcher": [shout]})
    config = {"configurable": {"thread_id": "own-tools"}}
    team.compile().invoke({"messages": [("user", "Go")]}, config)
    results = [m.content for m in team.history(config, "Researcher_1") if isinstance(m, ToolMessage)]
    assert results == ["HI"]
