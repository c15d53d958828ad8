"""Scenario tests of the router: nothing hangs (mutual questions, silent leaders, failures, budgets) and bounces.

Scenarios run as ``test_team_routing.py`` describes.
"""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from scripting import act, call, error_codes, reply_when_done
from test_team_routing import LIMITS

from teamgraph import Policy
from teamgraph.messaging import notices
from teamgraph.tools import errors

LEADER = "Team Leader"


def busy(steps: int, final: str) -> list:
    """A member turn of ``steps`` tool steps, then a final answer."""
    return [act(call("list_files"))] * steps + [final]


# --- nothing hangs -------------------------------------------------------------------


def test_two_members_asking_each_other_do_not_deadlock(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="researcher", task="B"),
                ),
                *reply_when_done("Both finished.", "UI Operator_1", "Researcher_1"),
            ],
            "UI Operator_1": [
                act(call("ask_other_agent", display_name="Researcher_1", question="Your data?")),
                "UI final.",
            ],
            "Researcher_1": [
                act(call("ask_other_agent", display_name="UI Operator_1", question="Your layout?")),
                "Research final.",
            ],
        }
    )
    results = [
        str(m.content) for name in ("UI Operator_1", "Researcher_1") for m in run.tool_results(name, "ask_other_agent")
    ]
    broken = [r for r in results if "deadlock" in r]
    assert len(broken) == 1
    assert "UI Operator_1" in broken[0] and "Researcher_1" in broken[0]
    assert all(r["status"] != "pending" for r in run.requests().values())
    assert all(a["status"] == "idle" and not a["waits"] for a in run.agents().values())
    assert run.user_replies() == ["Both finished."]


def test_a_question_the_leader_never_answers_is_reminded_then_released(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                "",
                "Thinking about it.",
                "",
                "",
                "",
                "",
            ],
            "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Designed in my own colour."],
        },
        policy=Policy(leader_reminders=1),  # the default
    )
    reminders = run.notices(LEADER, notices.REMINDER)
    assert len(reminders) == 1
    assert "ask_1" in reminders[0] and "answer_sub_agent_question" in reminders[0]
    released = run.tool_result("UI Operator_1", "ask_master")
    assert run.requests()["ask_1"]["status"] == "expired"
    assert released == run.requests()["ask_1"]["answer"]
    assert run.status("UI Operator_1") == "idle"
    assert run.history("UI Operator_1")[-1].content == "Designed in my own colour."


def _answer_the_question(messages):
    """Leader turn: answer the member's question if one is visible, else end the turn."""
    seen = "\n".join(str(m.content) for m in messages if not isinstance(m, AIMessage))
    ids = re.findall(r"Question from UI Operator_1\nid: (ask_\d+)\n", seen)
    answered = any(
        c["name"] == "answer_sub_agent_question" for m in messages if isinstance(m, AIMessage) for c in m.tool_calls
    )
    if ids and not answered:
        return act(call("answer_sub_agent_question", question_id=ids[-1], answer="Use blue."))
    return ""


@pytest.mark.parametrize(
    "leader_turns",
    [
        # The leader has seen the question but sleeps on the member instead of answering.
        ["", act(call("sleep", wait_sub_agent_output="UI Operator_1"))],
    ],
    ids=["sleep"],
)
def test_a_leader_blocked_on_a_member_that_waits_for_it_still_gets_to_answer(run_team, leader_turns):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design the page.")),
                *leader_turns,
                *[_answer_the_question] * 8,
            ],
            "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Designed in blue.", "Done."],
        }
    )
    answers = run.tool_results(LEADER, "answer_sub_agent_question")
    assert answers, "the leader never saw the question while it could still answer it"
    assert answers[0].status != "error", answers[0].content
    assert "Use blue." in run.tool_result("UI Operator_1", "ask_master")
    assert not any(a["waits"] for a in run.agents().values())


def test_a_member_that_asks_the_leader_while_the_leader_asks_it_answers_first(run_team):
    # NOTE: both waits are opened in the same superstep: the member's counts as the
    # newer one, so its question is cancelled; it then reads the leader's and replies.
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design the page.")),
                act(call("ask_sub_agent", display_name="UI Operator_1", question="ETA?")),
                *[_answer_the_question] * 8,
            ],
            "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Ready in an hour.", "Done."],
        }
    )
    assert run.tool_result("UI Operator_1", "ask_master").startswith("Error: deadlock:")
    assert run.tool_result(LEADER, "ask_sub_agent").endswith("Ready in an hour.")
    statuses = {r["kind"]: r["status"] for r in run.requests().values()}
    assert statuses == {"ask": "cancelled", "question": "answered"}
    assert not run.tool_results(LEADER, "answer_sub_agent_question")  # the cancelled question never reached it
    assert not any(a["waits"] for a in run.agents().values())


def test_ask_sub_agent_to_a_member_that_ends_without_text_does_not_hang(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("ask_sub_agent", display_name="Researcher_1", question="Status?")),
                "",
                "",
                "No answer.",
            ],
            "Researcher_1": [""],
        }
    )
    result = run.tool_result(LEADER, "ask_sub_agent")
    assert run.requests()["ask_1"]["status"] == "expired"
    assert result == run.requests()["ask_1"]["answer"] and "Researcher_1" in result
    assert not run.agents()[LEADER]["waits"]


def test_a_failing_member_is_marked_failed_and_the_team_goes_on(run_team):
    def provider_down(messages):
        raise RuntimeError("provider down")

    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="researcher", task="B"),
                ),
                *reply_when_done("Researcher done; UI failed.", "Researcher_1"),
            ],
            "UI Operator_1": [provider_down],
            "Researcher_1": busy(1, "Research done."),
        }
    )
    assert run.status("UI Operator_1") == "failed"
    failures = run.notices(LEADER, notices.FAILED)
    assert len(failures) == 1 and "UI Operator_1" in failures[0] and "provider down" in failures[0]
    assert run.status("Researcher_1") == "idle"
    assert run.user_replies() == ["Researcher done; UI failed."]


def test_a_member_looping_past_its_step_budget_is_stopped_and_the_leader_told(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="code-reviewer", task="Review.")), "", "Reviewer stopped."],
            "Code Reviewer_1": [act(call("list_files"))] * 10,
        },
        policy=LIMITS,
    )
    record = run.agents()["Code Reviewer_1"]
    assert record["status"] == "stopped"
    assert record["steps"] == 3
    assert any("Code Reviewer_1" in t and "stopped" in t for t in run.inbox_texts(LEADER))
    assert run.user_replies() == ["Reviewer stopped."]


def test_sleep_on_a_member_that_fails_wakes_the_leader(run_team):
    def provider_down(messages):
        raise RuntimeError("provider down")

    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="B")),
                act(call("sleep", wait_sub_agent_output="Researcher_1")),
                "Researcher failed.",
                "",
            ],
            "Researcher_1": [act(call("list_files")), provider_down],
        }
    )
    result = run.tool_result(LEADER, "sleep")
    assert "Researcher_1" in result and "failed" in result
    assert run.status("Researcher_1") == "failed"


# --- bounces ------------------------------------------------------------------------


def test_a_message_to_a_member_terminated_earlier_in_the_same_step_is_refused(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Research.")),
                act(
                    call("terminate_sub_agent", display_name="Researcher_1"),
                    call("send_message_to_sub_agent", display_name="Researcher_1", message="Late news."),
                ),
                "Done.",
                "",
            ],
            "Researcher_1": busy(3, "never"),
        }
    )
    # The sender learns at once, from the tool result, that nothing was sent.
    assert error_codes(run, LEADER, "send_message_to_sub_agent") == [errors.AGENT_ENDED]
    assert not any("Late news." in str(m.content) for m in run.history("Researcher_1"))


def test_unread_messages_of_a_terminated_member_are_bounced_and_its_question_cancelled(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                "",
                act(
                    call("send_message_to_sub_agent", display_name="UI Operator_1", message="Please hurry."),
                    call("terminate_sub_agent", display_name="UI Operator_1"),
                ),
                "Terminated it.",
                "",
            ],
            "UI Operator_1": [act(call("ask_master", question="Colour?")), "never"],
        }
    )
    history = run.history("UI Operator_1")
    assert not any("Please hurry." in str(m.content) for m in history)
    # Its open call was closed, so its history stays valid for a model.
    assert isinstance(history[-1], ToolMessage) and history[-1].tool_call_id == history[-2].tool_calls[0]["id"]
    assert run.requests()["ask_1"]["status"] == "cancelled"
    bounced = run.notices(LEADER, notices.BOUNCED)
    assert len(bounced) == 1 and "Please hurry." in bounced[0]
    assert [d["to"] for d in run.values["deliveries"].values() if d["status"] == "bounced"] == ["UI Operator_1"]


@pytest.mark.parametrize(
    "asking_call",
    [
        call("ask_sub_agent", display_name="Researcher_1", question="Status?"),
        call("sleep", wait_sub_agent_output="Researcher_1"),
    ],
    ids=["ask_sub_agent", "sleep"],
)
def test_waiting_on_a_member_terminated_in_the_same_step_answers_at_once(run_team, asking_call):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Research.")),
                act(call("terminate_sub_agent", display_name="Researcher_1"), asking_call),
                "Done.",
                "",
            ],
            "Researcher_1": busy(3, "never"),
        }
    )
    result = run.tool_result(LEADER, asking_call["name"])
    assert "Researcher_1" in result and "terminated" in result, result
    assert "deadlock" not in result, result


def test_a_question_to_a_peer_terminated_in_the_same_superstep_is_answered_not_deadlocked(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="researcher", task="B"),
                ),
                act(call("terminate_sub_agent", display_name="Researcher_1")),
                *reply_when_done("Done.", "UI Operator_1"),
            ],
            "UI Operator_1": [
                act(call("ask_other_agent", display_name="Researcher_1", question="Your data?")),
                "UI done.",
            ],
            "Researcher_1": busy(3, "never"),
        }
    )
    result = run.tool_result("UI Operator_1", "ask_other_agent")
    assert "Researcher_1" in result and "terminated" in result, result
    assert "deadlock" not in result, result
    assert run.requests()["ask_1"]["status"] == "cancelled"


def test_a_question_from_a_member_terminated_in_the_same_superstep_is_cancelled(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                act(call("terminate_sub_agent", display_name="UI Operator_1")),
                *[""] * 6,
            ],
            "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Designed."],
        }
    )
    assert run.status("UI Operator_1") == "terminated"
    # Nothing waits for the leader: it is not reminded of a question nobody needs.
    assert run.notices(LEADER, notices.REMINDER) == []
    for request in run.requests().values():
        assert request["status"] == "cancelled", request
    # The member's history stays valid: its call is closed.
    history = run.history("UI Operator_1")
    assert isinstance(history[-1], ToolMessage)
