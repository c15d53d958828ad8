"""Human in the loop: the request tracker, policy routing and the human gate.

Every scenario runs a whole team through ``graph.invoke`` with a ScriptedChatModel
(an agent's turn index is the number of AI messages already in its history) and a
fake clock. ``hitl_team`` (conftest.py) checks after every ``send`` and ``resume``
that each history holds each message once and was only appended to.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fidelity_fixtures import envelopes_in, has_envelope
from langchain_core.messages import SystemMessage
from pydantic import ValidationError
from scripting import act, call, error_codes

from teamgraph import Policy
from teamgraph.graph.guarded import ResumeValueError
from teamgraph.messaging import notices
from teamgraph.messaging.results import plan_submitted
from teamgraph.tools import errors

LEADER = "Team Leader"
MEMBER = "Researcher_1"
APPROVE_SHAPE = '{"approve": true or false, "feedback": "..."}'
STRING_SHAPE = "a string (your answer)"


def create(role_id: str = "researcher", task: str = "Research the topic.") -> dict:
    return call("create_sub_agent", role_id=role_id, task=task)


PLAN = call(
    "propose_plan",
    summary="Research, then write.",
    steps=[{"title": "Find facts", "role_id": "researcher"}, {"title": "Write it up", "depends_on": [1]}],
    complexity="simple",
)


# --- the policy ---------------------------------------------------------------------


def test_policy_defaults_say_who_decides_each_kind_and_when_to_pause():
    policy = Policy()

    assert (policy.ask, policy.plan, policy.member_plan, policy.approval) == ("leader", "human", "leader", "leader")
    assert [policy.decider(k) for k in ("ask", "plan", "member_plan", "approval")] == [
        "leader",
        "human",
        "leader",
        "leader",
    ]
    assert policy.pause == "when_blocked"
    assert policy.require_plan is False
    assert policy.shutdown_timeout == 300.0
    custom = Policy(
        ask="human",
        plan="leader",
        member_plan="leader_then_human",
        approval="human",
        pause="immediately",
        require_plan=True,
        shutdown_timeout=5,
    )
    assert [custom.decider(k) for k in ("ask", "plan", "member_plan", "approval")] == [
        "human",
        "leader",
        "leader_then_human",
        "human",
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {"ask": "nobody"},
        {"plan": "user"},
        {"member_plan": "Leader"},
        {"approval": None},
        {"pause": "later"},
        {"shutdown_timeout": 0},
        {"shutdown_timeout": -1},
        {"who_decides": "leader"},
    ],
)
def test_policy_refuses_unknown_deciders_pauses_and_fields(fields):
    with pytest.raises(ValidationError):
        Policy(**fields)


# --- the request tracker ----------------------------------------------------------------


def test_request_ids_share_one_counter_across_kinds_and_records_say_who_when_and_what(hitl_team, fake_clock):
    """plan_1, ask_2, member_plan_3, approval_4, shutdown_5 in one thread, with who/when/answer."""

    def later(turn):
        def step(messages):
            fake_clock.advance(10)
            return turn

        return step

    run = hitl_team(
        {
            LEADER: [
                act(PLAN),
                act(create()),
                "",
                act(call("answer_sub_agent_question", question_id="ask_2", answer="Use the docs.")),
                "",
                act(call("review_plan", request_id="member_plan_3", approve=True, feedback="Go.")),
                "",
                act(call("review_plan", request_id="approval_4", approve=True)),
                act(call("shutdown_request", display_name=MEMBER, reason="Work is done.")),
                "",
                "All done.",
            ],
            MEMBER: [
                later(act(call("ask_master", question="Which sources?"))),
                later(act(call("submit_plan", plan="1. read 2. summarise"))),
                later(act(call("request_approval", operation="delete notes.md", reason="outdated"))),
                later(act(call("list_files"))),
                later(act(call("shutdown_response", request_id="shutdown_5", approve=True))),
            ],
        },
        policy=Policy(shutdown_timeout=120),
    )

    paused = run.interrupt_of(run.send("Research X"))
    assert list(paused["requests"]) == ["plan_1"]
    out = run.resume({"plan_1": {"approve": True, "feedback": "ok"}})

    assert run.interrupt_of(out) is None
    requests = run.requests()
    assert list(requests) == ["plan_1", "ask_2", "member_plan_3", "approval_4", "shutdown_5"]
    rows = {rid: (r["kind"], r["from"], r["to"], r["decider"], r["status"]) for rid, r in requests.items()}
    assert rows == {
        "plan_1": ("plan", LEADER, "user", "human", "approved"),
        "ask_2": ("ask", MEMBER, LEADER, "leader", "answered"),
        "member_plan_3": ("member_plan", MEMBER, LEADER, "leader", "approved"),
        "approval_4": ("approval", MEMBER, LEADER, "leader", "approved"),
        "shutdown_5": ("shutdown", LEADER, MEMBER, None, "approved"),
    }
    # When each was opened (the member's turns move the fake clock by 10 s each).
    assert [requests[r]["opened_at"] for r in requests] == [
        "2030-01-01T09:00:00+00:00",
        "2030-01-01T09:00:10+00:00",
        "2030-01-01T09:00:20+00:00",
        "2030-01-01T09:00:30+00:00",
        "2030-01-01T09:00:40+00:00",
    ]
    assert requests["shutdown_5"]["deadline"] == "2030-01-01T09:02:40+00:00"
    assert all(requests[r]["deadline"] is None for r in ("plan_1", "ask_2", "member_plan_3", "approval_4"))
    assert requests["ask_2"]["answer"] == "Team Leader answered: Use the docs."
    assert requests["member_plan_3"]["answer"] == "Your plan (member_plan_3) was approved by Team Leader. Feedback: Go."
    assert requests["approval_4"]["answer"] == "approval_4 approved by Team Leader."
    assert requests["plan_1"]["answer"].startswith("Plan plan_1 approved by the user. Feedback: ok.")
    assert all(r["closed_at"] for r in requests.values())
    assert run.status(MEMBER) == "shutdown"


def pending_section(prompt: str) -> str:
    """The "# Pending requests" part of the leader's system prompt."""
    start = prompt.index("# Pending requests:")
    return prompt[start:].split("\n\n")[0]


def test_the_leaders_system_prompt_counts_pending_requests_on_every_step(hitl_team):
    prompts: list[str] = []

    def seen(turn):
        def step(messages):
            assert isinstance(messages[0], SystemMessage)
            prompts.append(str(messages[0].content))
            return turn

        return step

    run = hitl_team(
        {
            LEADER: [
                seen(act(create(), create("ui-operator", "Draw the page."))),
                seen(""),
                seen(act(call("answer_sub_agent_question", question_id="ask_1", answer="The docs."))),
                seen(""),
                seen(""),
                seen("Done."),
            ],
            MEMBER: [act(call("ask_master", question="Which sources?")), "Facts."],
            "UI Operator_1": [
                act(call("request_approval", operation="delete old.css", reason="unused")),
                "Page drawn.",
            ],
        },
        policy=Policy(approval="human"),
    )
    run.send("Go")
    assert list(run.pause()["requests"]) == ["approval_2"]
    run.resume({"approval_2": {"approve": True}})

    assert [pending_section(p) for p in prompts] == [
        "# Pending requests: none\nWaiting for you (0):\n- none",
        "# Pending requests: none\nWaiting for you (0):\n- none",
        "# Pending requests: 1 approval, 1 ask\nWaiting for you (1):\n- ask_1 (ask) from Researcher_1: Which sources?",
        "# Pending requests: 1 approval\nWaiting for you (0):\n- none",
        "# Pending requests: 1 approval\nWaiting for you (0):\n- none",
        "# Pending requests: none\nWaiting for you (0):\n- none",
    ]


# --- who decides: each kind x each decider ------------------------------------------------

# What the member calls, how the leader decides, and what the member gets back in each case.
MEMBER_REQUESTS = {
    "ask": {
        "id": "ask_1",
        "opens": call("ask_master", question="Which database?"),
        "tool": "ask_master",
        "leader_decides": call("answer_sub_agent_question", question_id="ask_1", answer="Use Postgres."),
        "view": {"type": "ask", "from": MEMBER, "question": "Which database?"},
        "leader_outcome": ("answered", "Team Leader answered: Use Postgres."),
        "person_value": "Use SQLite.",
        "person_outcome": ("answered", "The user answered: Use SQLite."),
        "leader_decision": {"answer": "Use Postgres."},
        "confirm": {"approve": True},
        "confirmed": ("answered", "Team Leader answered (confirmed by the user): Use Postgres."),
        "override": "Use SQLite.",
        "overridden": ("answered", "The user answered: Use SQLite."),
    },
    "member_plan": {
        "id": "member_plan_1",
        "opens": call("submit_plan", plan="1. read the schema 2. write the migration"),
        "tool": "submit_plan",
        "leader_decides": call("review_plan", request_id="member_plan_1", approve=True, feedback="Looks good"),
        "view": {"type": "member_plan", "from": MEMBER, "plan": "1. read the schema 2. write the migration"},
        "leader_outcome": ("approved", "Your plan (member_plan_1) was approved by Team Leader. Feedback: Looks good."),
        "person_value": {"approve": False, "feedback": "Add tests"},
        "person_outcome": (
            "rejected",
            "Your plan (member_plan_1) was rejected by the user. Feedback: Add tests. Revise it and submit_plan again.",
        ),
        "leader_decision": {"approve": True, "feedback": "Looks good"},
        "confirm": {"approve": True, "feedback": ""},
        "confirmed": (
            "approved",
            "Your plan (member_plan_1) was approved by the user (the Team Leader had approved).",
        ),
        "override": {"approve": False, "feedback": "Add tests"},
        "overridden": (
            "rejected",
            "Your plan (member_plan_1) was rejected by the user (the Team Leader had approved). "
            "Feedback: Add tests. Revise it and submit_plan again.",
        ),
    },
    "approval": {
        "id": "approval_1",
        "opens": call("request_approval", operation="drop the users table", reason="migration"),
        "tool": "request_approval",
        "leader_decides": call("review_plan", request_id="approval_1", approve=True, feedback="Back it up first"),
        "view": {"type": "approval", "from": MEMBER, "operation": "drop the users table", "reason": "migration"},
        "leader_outcome": ("approved", "approval_1 approved by Team Leader. Feedback: Back it up first."),
        "person_value": {"approve": False, "feedback": "Not in production"},
        "person_outcome": (
            "rejected",
            "approval_1 rejected by the user. Feedback: Not in production. Do not perform the operation.",
        ),
        "leader_decision": {"approve": True, "feedback": "Back it up first"},
        "confirm": {"approve": True},
        "confirmed": ("approved", "approval_1 approved by the user (the Team Leader had approved)."),
        "override": {"approve": False, "feedback": "Not in production"},
        "overridden": (
            "rejected",
            "approval_1 rejected by the user (the Team Leader had approved). "
            "Feedback: Not in production. Do not perform the operation.",
        ),
    },
}


def member_request_team(hitl_team, kind: str, decider: str):
    """The leader creates a member that opens one request; the leader then tries to decide it."""
    case = MEMBER_REQUESTS[kind]
    run = hitl_team(
        {
            LEADER: [act(create()), "", act(case["leader_decides"]), "", "Final report."],
            MEMBER: [act(case["opens"]), "Member done.", "Verdict noted."],
        },
        policy=Policy(**{kind: decider}),
    )
    return run, case


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


# --- the human gate: one interrupt, partial answers, refused values -----------------------


def two_person_requests_team(hitl_team, *, leader_turns=("", "", "Final report.")):
    """Two members wait for a person at once: ask_1 (a question) and approval_2 (an approval).

    The leader ends its turn until the members' results come in (one turn per result).
    """
    return hitl_team(
        {
            LEADER: [act(create(), create("ui-operator", "Clean the build.")), *leader_turns],
            MEMBER: [act(call("ask_master", question="Which sources?")), "Facts found."],
            "UI Operator_1": [
                act(call("request_approval", operation="rm -rf build/", reason="stale files")),
                "Build cleaned.",
            ],
        },
        policy=Policy(ask="human", approval="human"),
    )


def test_one_interrupt_carries_every_request_waiting_for_a_person(hitl_team):
    run = two_person_requests_team(hitl_team)

    out = run.send("Go")

    assert len(out["__interrupt__"]) == 1
    assert run.interrupt_of(out) == {
        "requests": {
            "ask_1": {
                "type": "ask",
                "from": MEMBER,
                "question": "Which sources?",
                "expects": STRING_SHAPE,
                "opened_at": "2030-01-01T09:00:00+00:00",
            },
            "approval_2": {
                "type": "approval",
                "from": "UI Operator_1",
                "operation": "rm -rf build/",
                "reason": "stale files",
                "expects": APPROVE_SHAPE,
                "opened_at": "2030-01-01T09:00:00+00:00",
            },
        }
    }
    assert run.pause() == run.interrupt_of(out)


def test_a_partial_answer_closes_those_requests_and_the_rest_stay_pending(hitl_team):
    run = two_person_requests_team(hitl_team)
    run.send("Go")

    out = run.resume({"approval_2": {"approve": True, "feedback": "ok"}})

    paused = run.interrupt_of(out)
    assert list(paused["requests"]) == ["ask_1"] and "error" not in paused
    assert run.request("approval_2")["status"] == "approved"
    assert run.request("ask_1")["status"] == "pending"
    # The approved member went on and finished; the other still waits.
    assert run.tool_texts("UI Operator_1", "request_approval") == ["approval_2 approved by the user. Feedback: ok."]
    assert (run.status("UI Operator_1"), run.status(MEMBER)) == ("idle", "waiting")
    assert run.tool_results(MEMBER, "ask_master") == []

    out = run.resume({"ask_1": "Use the docs."})

    assert run.interrupt_of(out) is None
    assert run.request("ask_1")["status"] == "answered"
    assert run.tool_texts(MEMBER, "ask_master") == ["The user answered: Use the docs."]
    assert run.values["messages"][-1].content == "Final report."


EXPECTS_DICT = "expected a dict {request_id: answer}"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"ask_7": "hello"}, ["unknown request id 'ask_7'"]),
        ({"ask_1": {"approve": True}}, ["request 'ask_1' takes a string (your answer)"]),
        ({"ask_1": ""}, ["request 'ask_1' takes a string (your answer)"]),
        ({"ask_1": 42}, ["request 'ask_1' takes a string (your answer)"]),
        ({"approval_2": "yes"}, [f"request 'approval_2' takes {APPROVE_SHAPE}"]),
        ({"approval_2": {"approve": "yes"}}, [f"request 'approval_2' takes {APPROVE_SHAPE}"]),
        ({"approval_2": {"feedback": "fine"}}, [f"request 'approval_2' takes {APPROVE_SHAPE}"]),
        ({"approval_2": {"approve": True, "feedback": 3}}, [f"request 'approval_2' takes {APPROVE_SHAPE}"]),
        ({"approval_2": {"approve": True, "when": "now"}}, [f"request 'approval_2' takes {APPROVE_SHAPE}"]),
        # One bad answer refuses the whole value: the good one is not applied either.
        ({"ask_1": "Docs.", "approval_2": "yes"}, [f"request 'approval_2' takes {APPROVE_SHAPE}"]),
        ("Docs.", [EXPECTS_DICT, "Command(resume={'ask_1': ...})"]),
        (["ask_1", "Docs."], [EXPECTS_DICT]),
        (True, [EXPECTS_DICT]),
    ],
)
def test_a_bad_resume_value_is_refused_with_what_is_expected_and_changes_nothing(hitl_team, value, says):
    run = two_person_requests_team(hitl_team)
    first = run.interrupt_of(run.send("Go"))
    before = run.values

    paused = run.interrupt_of(run.resume(value))

    assert paused["requests"] == first["requests"]
    error = paused["error"]
    assert error.startswith("Resume refused:")
    for words in says:
        assert words in error
    # It lists what each pending request takes.
    assert f"ask_1 takes {STRING_SHAPE}; approval_2 takes {APPROVE_SHAPE}" in error
    after = run.values
    assert after["requests"] == before["requests"]
    assert after["histories"] == before["histories"]
    assert after["messages"] == before["messages"]
    assert {n: (a["status"], a["waits"], a["inbox"]) for n, a in after["agents"].items()} == {
        n: (a["status"], a["waits"], a["inbox"]) for n, a in before["agents"].items()
    }

    # A good value afterwards is applied, and the error is gone.
    paused = run.interrupt_of(run.resume({"ask_1": "Docs."}))
    assert list(paused["requests"]) == ["approval_2"] and "error" not in paused
    assert run.request("ask_1")["status"] == "answered"


def test_rejecting_the_leaders_answer_without_giving_one_is_refused(hitl_team):
    """leader_then_human question: {"approve": false} alone would leave the member with no answer."""
    run, case = member_request_team(hitl_team, "ask", "leader_then_human")
    run.send("Do it")
    before = run.values

    paused = run.interrupt_of(run.resume({"ask_1": {"approve": False}}))

    assert paused is not None, run.request("ask_1")["answer"]
    assert "ask_1" in paused["error"]
    assert run.values["requests"] == before["requests"]
    assert run.values["histories"] == before["histories"]

    run.resume({"ask_1": "Use SQLite."})

    assert run.tool_texts(MEMBER, "ask_master") == ["The user answered: Use SQLite."]


def test_answering_a_request_already_closed_is_refused_saying_it_is_closed(hitl_team):
    run = two_person_requests_team(hitl_team)
    run.send("Go")
    run.resume({"ask_1": "Docs."})
    before = run.values

    paused = run.interrupt_of(run.resume({"ask_1": "Something else."}))

    assert list(paused["requests"]) == ["approval_2"]
    assert run.values["requests"] == before["requests"]
    assert run.values["histories"] == before["histories"]
    assert run.request("ask_1")["answer"] == "The user answered: Docs."
    # Not "unknown": the person must learn that ask_1 exists but is answered already.
    assert "unknown request id 'ask_1'" not in paused["error"], paused["error"]
    assert "ask_1" in paused["error"] and "answered" in paused["error"], paused["error"]
    assert f"approval_2 takes {APPROVE_SHAPE}" in paused["error"]


def test_an_empty_resume_changes_nothing(hitl_team):
    run = two_person_requests_team(hitl_team)
    first = run.interrupt_of(run.send("Go"))
    before = run.values

    # NOTE: LangGraph would take {} as an empty interrupt map and drop it silently:
    # the team graph refuses it with what to send instead.
    with pytest.raises(ResumeValueError, match="answers nothing"):
        run.resume({})

    (task,) = [t for t in run.graph.get_state(run.config).tasks if t.interrupts]
    assert task.interrupts[0].value["requests"] == first["requests"]
    assert run.values["requests"] == before["requests"]
    assert run.values["histories"] == before["histories"]


def test_the_interrupt_is_the___interrupt___update_of_stream(hitl_team):
    from langgraph.types import Command

    run = two_person_requests_team(hitl_team)

    updates = list(run.graph.stream({"messages": [("user", "Go")]}, run.config, stream_mode="updates"))

    assert "__interrupt__" in updates[-1]
    assert sum("__interrupt__" in u for u in updates) == 1
    (interrupt,) = updates[-1]["__interrupt__"]
    assert list(interrupt.value["requests"]) == ["ask_1", "approval_2"]

    updates = list(
        run.graph.stream(
            Command(resume={"ask_1": "Docs.", "approval_2": {"approve": True}}), run.config, stream_mode="updates"
        )
    )

    assert not any("__interrupt__" in u for u in updates)
    assert "human" in updates[0]  # the gate's answers, then the team goes on
    assert run.request("ask_1")["status"] == "answered"
    assert run.request("approval_2")["status"] == "approved"
    run.check_histories()


# --- when the team pauses -------------------------------------------------------------------


def busy_colleague_team(hitl_team, pause: str):
    """Researcher_1 asks a person at once; UI Operator_1 has three more steps of work."""
    return hitl_team(
        {
            LEADER: [act(create(), create("ui-operator", "Draw the page.")), "", "", "", "", "Final report."],
            MEMBER: [act(call("ask_master", question="Which sources?")), "Facts found."],
            "UI Operator_1": [
                act(call("list_files")),
                act(call("list_files")),
                act(call("list_files")),
                "Page drawn.",
            ],
        },
        policy=Policy(ask="human", pause=pause),
    )


def test_when_blocked_the_team_keeps_working_and_pauses_only_when_nobody_can_go_on(hitl_team):
    run = busy_colleague_team(hitl_team, "when_blocked")

    paused = run.interrupt_of(run.send("Go"))

    assert list(paused["requests"]) == ["ask_1"]
    # Everything the colleague could do was done before the pause.
    assert run.ai_count("UI Operator_1") == 4
    assert run.status("UI Operator_1") == "idle"
    assert any(
        e["sender"] == "UI Operator_1" and e["tag"] == "Output" and e["body"] == "Page drawn."
        for e in envelopes_in(run, LEADER)
    )
    assert {n: a["status"] for n, a in run.agents().items()} == {
        LEADER: "idle",
        MEMBER: "waiting",
        "UI Operator_1": "idle",
    }

    run.resume({"ask_1": "Docs."})

    assert run.tool_texts(MEMBER, "ask_master") == ["The user answered: Docs."]
    assert run.ai_count("UI Operator_1") == 4


def test_immediately_the_team_pauses_as_soon_as_a_request_waits_for_a_person(hitl_team):
    run = busy_colleague_team(hitl_team, "immediately")

    paused = run.interrupt_of(run.send("Go"))

    assert list(paused["requests"]) == ["ask_1"]
    # The colleague still had work to do when the run paused.
    assert run.ai_count("UI Operator_1") < 4
    assert run.status("UI Operator_1") == "running"
    assert not any("Page drawn." in t for t in run.inbox_texts(LEADER))

    out = run.resume({"ask_1": "Docs."})

    assert run.interrupt_of(out) is None
    assert run.ai_count("UI Operator_1") == 4
    assert [str(m.content) for m in run.history("UI Operator_1")].count("Page drawn.") == 1
    assert run.tool_texts(MEMBER, "ask_master") == ["The user answered: Docs."]
    assert [m.status for m in run.tool_results("UI Operator_1", "list_files")] == ["success"] * 3


# --- a pause survives the process -------------------------------------------------------------

RESUME_IN_NEW_PROCESS = textwrap.dedent(
    """
    import json, sys
    from langgraph.types import Command
    from teamgraph import Policy, ScriptedChatModel, Team

    home, thread, script, answers = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
    team = Team(model=ScriptedChatModel(script), home=home, policy=Policy(ask="human", approval="human"))
    graph = team.compile()
    config = {"configurable": {"thread_id": thread}}
    paused = graph.get_state(config).interrupts[0].value
    out = graph.invoke(Command(resume=answers), config)
    print(json.dumps({
        "paused_on": sorted(paused["requests"]),
        "interrupt": [i.value for i in out.get("__interrupt__", [])],
        "reply": out["messages"][-1].content,
    }))
    """
)


@pytest.mark.slow
def test_a_pause_is_resumed_by_a_new_process_over_the_same_sqlite_file(hitl_team, team_home):
    script = {
        LEADER: [act(create(), create("ui-operator", "Clean the build.")), "", "Final report."],
        MEMBER: [act(call("ask_master", question="Which sources?")), "Facts found."],
        "UI Operator_1": [
            act(call("request_approval", operation="rm -rf build/", reason="stale files")),
            "Build cleaned.",
        ],
    }
    run = hitl_team(script, policy=Policy(ask="human", approval="human"), fresh=True)
    assert list(run.interrupt_of(run.send("Go"))["requests"]) == ["ask_1", "approval_2"]
    assert run.team.db_path.is_file() and run.team.db_path.parent == team_home

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            RESUME_IN_NEW_PROCESS,
            str(team_home),
            run.config["configurable"]["thread_id"],
            json.dumps(script),
            json.dumps({"ask_1": "Use the docs.", "approval_2": {"approve": True, "feedback": "fine"}}),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"paused_on": ["approval_2", "ask_1"], "interrupt": [], "reply": "Final report."}
    # This process sees what the other one did.
    assert run.pause() is None
    assert run.request("ask_1")["status"] == "answered"
    assert run.request("approval_2")["status"] == "approved"
    assert run.tool_texts(MEMBER, "ask_master") == ["The user answered: Use the docs."]
    assert run.tool_texts("UI Operator_1", "request_approval") == ["approval_2 approved by the user. Feedback: fine."]
    run.check_histories()


# --- histories stay exact across resumes -------------------------------------------------------


def report_once_all_in(*results: str):
    """A leader turn: end the turn quietly until every result is in, then report."""

    def turn(messages):
        seen = "\n".join(str(m.content) for m in messages[1:])
        return "Final report." if all(r in seen for r in results) else ""

    return turn


def test_histories_hold_each_message_once_after_every_resume(hitl_team):
    """Refused, partial and final resumes, with a colleague's step cached across the pause."""
    run = hitl_team(
        {
            LEADER: [
                act(create(), create("ui-operator", "Draw the page."), create("code-reviewer", "Review.")),
                *[report_once_all_in("Facts found.", "Page drawn.", "Reviewed.")] * 8,
            ],
            MEMBER: [act(call("ask_master", question="Which sources?")), "Facts found."],
            "UI Operator_1": [
                act(call("request_approval", operation="delete old.css", reason="unused")),
                act(call("list_files")),
                "Page drawn.",
            ],
            "Code Reviewer_1": [act(call("list_files")), act(call("list_files")), "Reviewed."],
        },
        policy=Policy(ask="human", approval="human", pause="immediately"),
    )
    snapshots, requests = [], []

    def snapshot():
        values = run.values
        snapshots.append({n: [(type(m).__name__, str(m.content)) for m in h] for n, h in values["histories"].items()})
        requests.append(values["requests"])

    run.send("Go")  # every call below checks: no message twice, histories only appended to
    snapshot()
    resume_errors = []
    for value in ({"ask_1": {"approve": True}}, {"nope": "x"}, {"approval_2": {"approve": True}}, {"ask_1": "Docs."}):
        paused = run.interrupt_of(run.resume(value))
        resume_errors.append(paused.get("error") if paused else None)
        snapshot()

    assert run.pause() is None
    final = snapshots[-1]
    for name, history in final.items():
        ai_turns = [c for t, c in history if t == "AIMessage"]
        assert len(ai_turns) == run.ai_count(name)
    assert [c for t, c in final[MEMBER] if t == "AIMessage"] == ["", "Facts found."]
    assert [c for t, c in final["UI Operator_1"] if t == "AIMessage"] == ["", "", "Page drawn."]
    assert [c for t, c in final["Code Reviewer_1"] if t == "AIMessage"] == ["", "", "Reviewed."]
    assert [c for t, c in final[LEADER] if t == "AIMessage"][-1] == "Final report."
    assert [e is not None for e in resume_errors] == [True, True, False, False]
    # Refused resumes changed no request (the colleagues kept working: pause="immediately").
    assert requests[1] == requests[0] and requests[2] == requests[1]
    assert requests[0]["ask_1"]["status"] == requests[0]["approval_2"]["status"] == "pending"
    user_facing = [m.content for m in run.values["messages"]]
    assert user_facing == ["Go", "Final report."], [(t, c) for t, c in final[LEADER]]
