"""Causality and pairing: a stop during a deferred call, answers that meet a closed request."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from teamgraph import Policy
from teamgraph.messaging.envelopes import LEADER
from teamgraph.messaging.results import error_of
from teamgraph.tools import errors
from tests.invariants import assert_team_invariants
from tests.scripting import act, call, quiet

MEMBER = "Researcher_1"

DEFERRED_CALLS = {
    "ask_master": call("ask_master", question="Which source?"),
    "request_approval": call("request_approval", operation="delete the cache", reason="it is stale"),
}


@pytest.mark.parametrize("tool", list(DEFERRED_CALLS))
def test_a_stop_during_a_deferred_call_answers_it_cancels_its_request_and_keeps_the_pairing(run_team, tool):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Research.")),
                act(call("stop_sub_agent", display_name=MEMBER)),  # beside the member's deferred call
                *quiet(),
            ],
            MEMBER: [act(DEFERRED_CALLS[tool]), "", ""],
        },
        policy=Policy(member_plan="leader", approval="leader"),
    )
    history = run.history(MEMBER)
    ai = next(i for i, m in enumerate(history) if isinstance(m, AIMessage) and m.tool_calls)
    result = history[ai + 1]
    assert isinstance(result, ToolMessage) and result.tool_call_id == history[ai].tool_calls[0]["id"]
    assert result.content.startswith("Cancelled")
    assert isinstance(history[ai + 2], HumanMessage)  # the stop notice comes after the result
    (request,) = run.requests().values()
    assert request["status"] == "cancelled"
    assert run.status(MEMBER) == "stopped"
    # The decider is told (the request's envelope is replaced by a notice, or a notice follows it).
    leader_inbox = "\n".join(run.inbox_texts(LEADER))
    assert f"{request['id']} from {MEMBER} was cancelled" in leader_inbox
    assert_team_invariants(run.values)


def test_an_answer_to_a_question_whose_asker_is_stopped_meanwhile_still_reaches_it(run_team):
    # NOTE: the answer and the stop happen in the same superstep: answers are applied
    # before stops, so the asker gets the answer, then the stop notice; nothing is lost.
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="researcher", task="Ask the engineer."),
                    call("create_sub_agent", role_id="full-stack-engineer"),
                ),
                "",
                act(call("stop_sub_agent", display_name=MEMBER)),
                *quiet(),
            ],
            MEMBER: [act(call("ask_other_agent", display_name="Full-Stack Engineer_1", question="Port?")), "", ""],
            "Full-Stack Engineer_1": [act(call("answer_other_agent", question_id="ask_1", answer="8080")), "", ""],
        }
    )
    assert run.tool_result(MEMBER, "ask_other_agent") == "8080"
    assert run.request("ask_1")["status"] == "answered"
    assert not [e for e in run.tool_results("Full-Stack Engineer_1") if e.status == "error"]
    assert_team_invariants(run.values)


# --- a run always ends with the leader's report -------------------------------------------------


def _chatter(other: str):
    """A member that keeps messaging the other member, forever."""

    def play(messages):
        n = sum(isinstance(m, AIMessage) for m in messages)
        return act(call("send_message", to=other, content=f"ping {n}"))  # never the same call twice

    return [play] * 200


def _report_when_told(messages):
    last = str(messages[-1].content)
    return "Report: the members were stopped." if "Report to the user" in last or "report what" in last else ""


def test_two_members_messaging_each_other_forever_are_stopped_by_the_run_budget(run_team):
    a, b = "Researcher_1", "Researcher_2"
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="researcher", task="Talk to Researcher_2."),
                    call("create_sub_agent", role_id="researcher", task="Talk to Researcher_1."),
                ),
                *[_report_when_told] * 60,
            ],
            a: _chatter(b),
            b: _chatter(a),
        },
        policy=Policy(max_model_calls=40, max_turn_steps=1000),
    )
    assert run.user_replies()[-1] == "Report: the members were stopped."
    assert {run.status(a), run.status(b)} == {"stopped"}
    member_calls = run.ai_count(a) + run.ai_count(b)
    assert 40 - 2 <= member_calls <= 40 + 2  # the calls in flight when the budget ran out
    assert_team_invariants(run.values)


def test_members_stopped_by_their_step_budget_still_end_the_run_with_the_leaders_report(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Loop.")),
                "",  # the leader ends its turn silently while the member works
                *[_report_when_told] * 10,
            ],
            "Researcher_1": [act(call("list_files"))] * 10,
        },
        policy=Policy(max_turn_steps=3),
    )
    assert run.status("Researcher_1") == "stopped"
    assert run.user_replies() == ["Report: the members were stopped."]
    assert_team_invariants(run.values)


def test_writing_the_same_custom_role_again_succeeds_a_different_one_is_refused(make_team, team_home):
    role = {"id": "analyst", "name": "Analyst", "description": "Analyses.", "prompt": "Analyse."}
    run = make_team(
        {
            LEADER: [
                act(call("create_custom_agent", **role)),
                act(call("create_custom_agent", **role)),  # as a step re-run after a crash would
                act(call("create_custom_agent", **{**role, "prompt": "Something else."})),
                "Done.",
            ]
        }
    )
    run.send("Make a role")
    first, again, other = run.tool_results(LEADER, "create_custom_agent")
    assert first.status != "error" and again.status != "error"
    assert (other.status, error_of(other)) == ("error", errors.BAD_ARGUMENT) and "analyst" in other.content
    assert (team_home / "roles" / "analyst.md").read_text().rstrip().endswith("Analyse.")
