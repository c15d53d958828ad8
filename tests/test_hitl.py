"""Human in the loop: the policy and the request tracker.

Who decides each kind of request is in ``test_hitl_deciders.py``; the human gate and
when the team pauses, in ``test_human_gate.py``.

Every scenario runs a whole team through ``graph.invoke`` with a ScriptedChatModel
(an agent's turn index is the number of AI messages already in its history) and a
fake clock. ``hitl_team`` (conftest.py) checks after every ``send`` and ``resume``
that each history holds each message once and was only appended to.
"""

from __future__ import annotations

import pytest
from hitl_fixtures import LEADER, MEMBER, PLAN, create
from langchain_core.messages import SystemMessage
from pydantic import ValidationError
from scripting import act, call

from teamgraph import Policy

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
