"""Human in the loop: who decides each kind of request (the leader, a person, or both).

Scenarios run as ``test_hitl.py`` describes (``hitl_team``, conftest.py).
"""

from __future__ import annotations

import pytest
from fidelity_fixtures import envelopes_in, has_envelope
from hitl_fixtures import (
    APPROVE_SHAPE,
    LEADER,
    MEMBER,
    MEMBER_REQUESTS,
    PLAN,
    STRING_SHAPE,
    create,
    member_request_team,
)
from scripting import act, call, error_codes

from teamgraph import Policy
from teamgraph.messaging import notices
from teamgraph.messaging.results import plan_submitted
from teamgraph.tools import errors

# --- who decides: each kind x each decider ------------------------------------------------


def envelope_reached_leader(run, request_id: str) -> bool:
    return any(has_envelope(text, id=request_id) for text in run.inbox_texts(LEADER))


def member_outcomes(run, case) -> list[str]:
    """What the member got for its request: its call's result or, for a plan, the verdict.

    NOTE: ``submit_plan`` returns the plan's id at once (docs/protocols.md, "Plans"); the
    verdict reaches the member as a reply that names the id.
    """
    if case["tool"] != "submit_plan":
        return run.tool_texts(MEMBER, case["tool"])
    assert run.tool_texts(MEMBER, "submit_plan") == [plan_submitted(case["id"])]
    return [e["body"] for e in envelopes_in(run, MEMBER) if e["fields"].get("to") == case["id"]]


def waits_for_verdict(run, case) -> None:
    """The member has no verdict yet: its call is open, or (a plan) it has the id and goes on."""
    if case["tool"] == "submit_plan":
        assert run.tool_texts(MEMBER, "submit_plan") == [plan_submitted(case["id"])]
        assert member_outcomes(run, case) == []
    else:
        assert run.status(MEMBER) == "waiting"
        assert run.tool_results(MEMBER, case["tool"]) == []


@pytest.mark.parametrize("kind", ["ask", "member_plan", "approval"])
def test_a_request_the_leader_decides_never_pauses_and_the_leaders_decision_is_the_result(hitl_team, kind):
    run, case = member_request_team(hitl_team, kind, "leader")

    out = run.send("Do it")

    assert run.interrupt_of(out) is None and run.pause() is None
    assert envelope_reached_leader(run, case["id"])
    record = run.request(case["id"])
    assert (record["route"], record["decider"], record["leader_decision"]) == (LEADER, "leader", None)
    assert (record["status"], record["answer"]) == case["leader_outcome"]
    assert member_outcomes(run, case) == [case["leader_outcome"][1]]
    assert run.values["messages"][-1].content == "Final report."


@pytest.mark.parametrize("kind", ["ask", "member_plan", "approval"])
def test_a_request_a_person_decides_pauses_and_the_leader_cannot_decide_it(hitl_team, kind):
    run, case = member_request_team(hitl_team, kind, "human")

    paused = run.interrupt_of(run.send("Do it"))

    assert list(paused["requests"]) == [case["id"]]
    view = paused["requests"][case["id"]]
    assert view.items() >= case["view"].items()
    assert view["expects"] == (STRING_SHAPE if kind == "ask" else APPROVE_SHAPE)
    assert "leader_decision" not in view
    record = run.request(case["id"])
    assert (record["status"], record["route"], record["decider"]) == ("pending", "human", "human")
    waits_for_verdict(run, case)
    # The leader gets no envelope to decide it; a notice (that does not wake it) says a person decides.
    assert not envelope_reached_leader(run, case["id"])
    unread = [m["text"] for m in run.agents()[LEADER]["inbox"]]
    # NOTE: queued, or already read if the member went on (a plan's id comes back at once).
    assert any(f"{case['id']} waits for the user" in text for text in [*unread, *run.inbox_texts(LEADER)])

    out = run.resume({case["id"]: case["person_value"]})

    assert run.interrupt_of(out) is None
    assert any(f"{case['id']} waits for the user" in text for text in run.inbox_texts(LEADER))
    assert not envelope_reached_leader(run, case["id"])
    record = run.request(case["id"])
    assert (record["status"], record["answer"]) == case["person_outcome"]
    assert member_outcomes(run, case) == [case["person_outcome"][1]]
    # The leader tried to decide it afterwards: refused, nothing changed.
    leader_try = run.tool_results(LEADER, case["leader_decides"]["name"])
    assert len(leader_try) == 1 and leader_try[0].status == "error"
    assert run.request(case["id"]) == record


@pytest.mark.parametrize("verdict", ["confirm", "override"])
@pytest.mark.parametrize("kind", ["ask", "member_plan", "approval"])
def test_leader_then_human_the_leaders_decision_waits_for_a_person_to_confirm_or_override(hitl_team, kind, verdict):
    run, case = member_request_team(hitl_team, kind, "leader_then_human")

    paused = run.interrupt_of(run.send("Do it"))

    # The leader decided first ...
    assert envelope_reached_leader(run, case["id"])
    assert run.tool_results(LEADER, case["leader_decides"]["name"])[0].status != "error"
    # ... but its decision has not taken effect: the member still waits, the person is asked.
    assert list(paused["requests"]) == [case["id"]]
    assert paused["requests"][case["id"]]["leader_decision"] == case["leader_decision"]
    record = run.request(case["id"])
    assert (record["status"], record["route"], record["decider"]) == ("pending", "human", "leader_then_human")
    assert record["leader_decision"] == case["leader_decision"]
    waits_for_verdict(run, case)

    out = run.resume({case["id"]: case[verdict]})

    assert run.interrupt_of(out) is None
    expected = case["confirmed" if verdict == "confirm" else "overridden"]
    record = run.request(case["id"])
    assert (record["status"], record["answer"]) == expected
    assert member_outcomes(run, case) == [expected[1]]
    assert run.values["messages"][-1].content == "Final report."


def test_a_question_the_leader_answered_first_tells_the_person_how_to_confirm_it(hitl_team):
    """The person sees the leader's answer; "expects" must say {"approve": ...} confirms it."""
    run, case = member_request_team(hitl_team, "ask", "leader_then_human")

    view = run.interrupt_of(run.send("Do it"))["requests"]["ask_1"]

    assert view["leader_decision"] == {"answer": "Use Postgres."}
    assert "approve" in view["expects"], view["expects"]


@pytest.mark.parametrize("decider", ["leader", "human", "leader_then_human"])
def test_the_leaders_plan_is_decided_per_policy(hitl_team, decider):
    run = hitl_team(
        {LEADER: [act(PLAN), "Planned."]},
        policy=Policy(plan=decider),
    )

    out = run.send("Plan it")

    if decider == "leader":
        # Policy.plan="leader": the plan is approved at once, nobody is asked.
        assert run.interrupt_of(out) is None
        by = "Team Leader (Policy.plan='leader')"
    else:
        # The leader never decides its own plan: with leader_then_human it goes to a person too.
        paused = run.interrupt_of(out)
        assert list(paused["requests"]) == ["plan_1"]
        view = paused["requests"]["plan_1"]
        assert (view["type"], view["from"], view["summary"], view["complexity"]) == (
            "plan",
            LEADER,
            "Research, then write.",
            "simple",
        )
        assert [s["title"] for s in view["steps"]] == ["Find facts", "Write it up"]
        assert view["expects"] == APPROVE_SHAPE
        assert run.request("plan_1")["status"] == "pending"
        assert "board" not in run.values["team"]
        out = run.resume({"plan_1": {"approve": True}})
        assert run.interrupt_of(out) is None
        by = "the user"

    record = run.request("plan_1")
    assert (record["status"], record["decider"], record["from"]) == ("approved", decider, LEADER)
    assert run.tool_texts(LEADER, "propose_plan") == [
        f"Plan plan_1 approved by {by}. Its steps are the task board now: task_1 Find facts, task_2 Write it up."
    ]
    assert [t["id"] for t in run.values["team"]["board"]] == ["task_1", "task_2"]
    assert run.values["messages"][-1].content == "Planned."


def test_a_members_question_never_reaches_a_person_when_the_leader_decides(hitl_team):
    """Policy.ask="leader" and a leader that does not answer: reminded, then the asker goes on."""
    run = hitl_team(
        {
            LEADER: [act(create()), "", "", "", "Report."],
            MEMBER: [act(call("ask_master", question="Which sources?")), "Assumed the docs."],
        },
    )

    out = run.send("Research X")

    assert run.interrupt_of(out) is None and run.pause() is None
    record = run.request("ask_1")
    assert (record["route"], record["status"]) == (LEADER, "expired")
    assert ["ask_1" in t for t in run.notices(LEADER, notices.REMINDER)] == [True]
    assert run.tool_texts(MEMBER, "ask_master") == [
        "The Team Leader did not answer. Decide yourself, state your assumption, and go on."
    ]
    assert run.values["messages"][-1].content == "Report."


def test_ask_user_pauses_for_a_person_and_the_answer_is_the_leaders_tool_result(hitl_team):
    run = hitl_team({LEADER: [act(call("ask_user", question="Blue or red?")), "Going with blue."]})

    paused = run.interrupt_of(run.send("Design a logo"))

    assert paused == {
        "requests": {
            "ask_1": {
                "type": "ask",
                "from": LEADER,
                "to_user": True,
                "question": "Blue or red?",
                "expects": STRING_SHAPE,
                "opened_at": "2030-01-01T09:00:00+00:00",
            }
        }
    }
    run.resume({"ask_1": "Blue"})

    assert run.tool_texts(LEADER, "ask_user") == ["The user answered: Blue"]
    assert run.request("ask_1")["status"] == "answered"
    assert run.values["messages"][-1].content == "Going with blue."


@pytest.mark.parametrize("kind", ["ask", "member_plan", "approval"])
def test_the_leader_escalates_a_request_to_a_person(hitl_team, kind):
    case = MEMBER_REQUESTS[kind]
    run = hitl_team(
        {
            LEADER: [
                act(create()),
                "",
                act(call("escalate_to_user", request_id=case["id"], note="Your call: it touches production.")),
                "",
                "Final report.",
            ],
            MEMBER: [act(case["opens"]), "Member done.", "Verdict noted."],
        },
    )

    paused = run.interrupt_of(run.send("Do it"))

    assert run.tool_texts(LEADER, "escalate_to_user") == [f"{case['id']} was sent to the user."]
    assert list(paused["requests"]) == [case["id"]]
    view = paused["requests"][case["id"]]
    assert view["note"] == "Your call: it touches production."
    assert view.items() >= case["view"].items()
    record = run.request(case["id"])
    assert (record["status"], record["route"], record["decider"]) == ("pending", "human", "leader")
    waits_for_verdict(run, case)

    run.resume({case["id"]: case["person_value"]})

    record = run.request(case["id"])
    assert (record["status"], record["answer"]) == case["person_outcome"]
    assert member_outcomes(run, case) == [case["person_outcome"][1]]


def test_escalating_a_request_that_does_not_wait_for_the_leader_is_an_error(hitl_team):
    run = hitl_team(
        {
            LEADER: [
                act(create()),
                "",
                act(
                    call("answer_sub_agent_question", question_id="ask_1", answer="Docs."),
                    call("escalate_to_user", request_id="ask_9"),
                ),
                act(call("escalate_to_user", request_id="ask_1")),
                "",
                "Done.",
            ],
            MEMBER: [act(call("ask_master", question="Which sources?")), "Facts."],
        },
    )

    out = run.send("Research X")

    assert run.interrupt_of(out) is None
    assert error_codes(run, LEADER, "escalate_to_user") == [errors.UNKNOWN_REQUEST] * 2
    assert len(run.tool_results(LEADER, "escalate_to_user")) == 2
    assert run.request("ask_1")["route"] == LEADER
    assert run.request("ask_1")["status"] == "answered"
