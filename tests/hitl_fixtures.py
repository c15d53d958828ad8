"""Shared names and scripts of the human-in-the-loop tests."""

from __future__ import annotations

from scripting import act, call

from teamgraph import Policy

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
