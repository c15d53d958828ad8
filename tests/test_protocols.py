"""Team protocols: the leader's plan and task board, member plans, shutdowns.

Every scenario runs a whole team through ``graph.invoke`` with a ScriptedChatModel
(an agent's turn index is the number of AI messages already in its history) and a
fake clock. ``hitl_team`` (conftest.py) checks after every ``send`` and ``resume``
that each history holds each message once and was only appended to.
"""

from __future__ import annotations

import json
from pathlib import Path

from fidelity_fixtures import envelopes_in
from langchain_core.messages import AIMessage, SystemMessage
from scripting import act, call, error_codes

from teamgraph import Policy
from teamgraph.messaging import notices
from teamgraph.messaging.results import error_of, plan_submitted
from teamgraph.tools import errors

LEADER = "Team Leader"
MEMBER = "Researcher_1"
PLAN_FIRST = errors.PLAN_REQUIRED


def recorded(prompts: list[str], turn):
    """A turn that records the system prompt the agent's model receives, then plays ``turn``."""

    def step(messages):
        assert isinstance(messages[0], SystemMessage)
        prompts.append(str(messages[0].content))
        return turn

    return step


def board_section(prompt: str) -> str:
    start = prompt.index("# Plan ")
    return prompt[start:].split("\n\n")[0]


# --- the leader's plan and the task board ------------------------------------------------------

PLAN_V1 = call(
    "propose_plan",
    summary="Research X.",
    steps=[{"title": "Find facts", "role_id": "researcher"}],
    complexity="simple",
)
PLAN_V2 = call(
    "propose_plan",
    summary="Research X, then write it up.",
    steps=[
        {"title": "Find facts", "role_id": "researcher"},
        {"title": "Write it up", "depends_on": [1]},
    ],
    complexity="medium",
)
DISPATCH = (
    call("create_sub_agent", role_id="researcher", task="Find facts about X."),
    call("send_message_to_sub_agent", display_name=MEMBER, message="Hurry."),
    call("ask_sub_agent", display_name=MEMBER, question="Status?"),
)


def test_require_plan_refuses_dispatch_until_a_plan_is_approved_and_a_rejection_returns_the_feedback(hitl_team):
    prompts: list[str] = []
    member_prompts: list[str] = []
    run = hitl_team(
        {
            LEADER: [
                act(*DISPATCH),
                act(PLAN_V1),
                act(DISPATCH[0]),
                act(PLAN_V2),
                act(DISPATCH[0]),
                recorded(prompts, ""),
                recorded(prompts, act(call("update_task", task_id="task_2", status="done", note="written"))),
                recorded(prompts, "Report: X explained."),
            ],
            MEMBER: [
                recorded(member_prompts, act(call("update_task", task_id="task_1", status="in_progress"))),
                act(call("update_task", task_id="task_1", status="done", note="facts.md")),
                "Facts found.",
            ],
        },
        policy=Policy(require_plan=True),
    )

    paused = run.interrupt_of(run.send("Explain X"))

    # Before any plan: creating, messaging and asking members are refused; nobody was created.
    assert [error_of(m) for m in run.tool_results(LEADER)[:3]] == [errors.PLAN_REQUIRED] * 3
    assert "propose_plan" in run.tool_texts(LEADER)[0]  # NOTE: it says how to get a plan approved
    assert list(run.agents()) == [LEADER]
    assert list(paused["requests"]) == ["plan_1"]

    paused = run.interrupt_of(run.resume({"plan_1": {"approve": False, "feedback": "Add a writing step"}}))

    assert run.tool_texts(LEADER, "propose_plan") == [
        "Plan plan_1 rejected by the user. Feedback: Add a writing step. Revise the plan and call propose_plan again."
    ]
    assert run.request("plan_1")["status"] == "rejected"
    assert run.values["team"]["plan"]["status"] == "rejected"
    assert "board" not in run.values["team"]
    # Still no approved plan: still refused.
    assert error_codes(run, LEADER, "create_sub_agent") == [errors.PLAN_REQUIRED] * 2
    assert len(run.tool_results(LEADER, "create_sub_agent")) == 2
    assert list(run.agents()) == [LEADER]
    assert list(paused["requests"]) == ["plan_2"]
    assert [s["title"] for s in paused["requests"]["plan_2"]["steps"]] == ["Find facts", "Write it up"]

    out = run.resume({"plan_2": {"approve": True, "feedback": "ok"}})

    assert run.interrupt_of(out) is None
    assert run.tool_texts(LEADER, "propose_plan")[1] == (
        "Plan plan_2 approved by the user. Feedback: ok. "
        "Its steps are the task board now: task_1 Find facts, task_2 Write it up."
    )
    assert (
        run.tool_texts(LEADER, "create_sub_agent")[2] == "Created Researcher_1 (Researcher). It is working on the task."
    )
    team = run.values["team"]
    assert team["plan"] == {
        "id": "plan_2",
        "status": "approved",
        "summary": "Research X, then write it up.",
        "complexity": "medium",
    }
    assert team["board"] == [
        {
            "id": "task_1",
            "title": "Find facts",
            "role_id": "researcher",
            "depends_on": [],
            "status": "done",
            "updated_by": MEMBER,
            "note": "facts.md",
            "assignee": MEMBER,
        },  # NOTE: claimed when its work started
        {
            "id": "task_2",
            "title": "Write it up",
            "role_id": None,
            "depends_on": ["task_1"],
            "status": "done",
            "updated_by": LEADER,
            "note": "written",
        },
    ]
    assert run.tool_texts(MEMBER, "update_task") == ["task_1 is in_progress.", "task_1 is done."]
    assert run.tool_texts(LEADER, "update_task") == ["task_2 is done."]
    # The board is in the leader's context (and the member's), updated as tasks move.
    assert [board_section(p) for p in prompts] == [
        "# Plan plan_2: approved\n- task_1 [in_progress] Find facts (Researcher_1)\n"
        "- task_2 [todo] Write it up (any role) (after task_1)",
        "# Plan plan_2: approved\n- task_1 [done] Find facts (Researcher_1)\n"
        "- task_2 [todo] Write it up (any role) (after task_1)",
        "# Plan plan_2: approved\n- task_1 [done] Find facts (Researcher_1)\n"
        "- task_2 [done] Write it up (any role) (after task_1)",
    ]
    assert "- task_1 [in_progress] Find facts (Researcher_1)" in member_prompts[0]
    assert run.values["messages"][-1].content == "Report: X explained."


def test_propose_plan_checks_its_steps_and_opens_nothing_when_they_are_wrong(hitl_team):
    run = hitl_team(
        {
            LEADER: [
                act(
                    call("propose_plan", summary="Nothing.", steps=[]),
                    call("propose_plan", summary="Bad role.", steps=[{"title": "Spy", "role_id": "spy"}]),
                    call(
                        "propose_plan", summary="Bad order.", steps=[{"title": "A", "depends_on": [2]}, {"title": "B"}]
                    ),
                ),
                "I could not plan.",
            ],
        },
        policy=Policy(require_plan=True),
    )

    out = run.send("Plan")

    assert run.interrupt_of(out) is None
    assert error_codes(run, LEADER, "propose_plan") == [errors.BAD_ARGUMENT, errors.UNKNOWN_ROLE, errors.BAD_ARGUMENT]
    assert len(run.tool_results(LEADER, "propose_plan")) == 3
    assert run.requests() == {}
    assert "plan" not in run.values["team"]


def test_update_task_refuses_a_task_that_is_not_on_the_board(hitl_team):
    run = hitl_team(
        {
            LEADER: [
                act(call("update_task", task_id="task_1", status="done")),
                act(PLAN_V2),
                act(
                    call("update_task", task_id="task_9", status="done"),
                    call("update_task", task_id="task_1", status="blocked", note="no access"),
                ),
                "Blocked.",
            ],
        },
        policy=Policy(plan="human"),
    )

    run.send("Go")
    run.resume({"plan_1": {"approve": True}})

    assert [error_of(m) for m in run.tool_results(LEADER, "update_task")] == [
        errors.UNKNOWN_TASK,
        errors.UNKNOWN_TASK,
        None,
    ]
    assert run.tool_texts(LEADER, "update_task")[2] == "task_1 is blocked."
    board = run.values["team"]["board"]
    assert [(t["id"], t["status"], t.get("note")) for t in board] == [
        ("task_1", "blocked", "no access"),
        ("task_2", "todo", None),
    ]


# --- a member's plan ---------------------------------------------------------------------------

BUILDER_ROLE = """\
---
id: builder
name: Builder
description: Builds things, after its plan is approved.
tools: [member, files, protocols]
require_plan: true
---
You build what you are asked to build.
"""


def builder_roles(tmp_path: Path) -> Path:
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "builder.md").write_text(BUILDER_ROLE, encoding="utf-8")
    return roles


WRITE = call("write_file", path="app.py", content="print('hi')\n")


def test_a_member_that_requires_a_plan_waits_for_approval_before_work_reject_then_approve(
    hitl_team, tmp_path, team_home
):
    leader_prompts: list[str] = []
    builder_prompts: list[str] = []

    def leader(messages):
        if not any(isinstance(m, AIMessage) for m in messages):
            return act(call("create_sub_agent", role_id="builder", task="Build app.py."))
        new = "\n".join(
            str(m.content)
            for m in messages[messages.index(next(m for m in reversed(messages) if isinstance(m, AIMessage))) + 1 :]
        )
        if "id: member_plan_2" in new:
            return act(
                call("review_plan", request_id="member_plan_2", approve=True),
                call("review_plan", request_id="member_plan_1", approve=True),
            )
        if "id: member_plan_1" in new:
            return recorded(
                leader_prompts,
                act(call("review_plan", request_id="member_plan_1", approve=False, feedback="Add tests")),
            )(messages)
        return "Built." if "app.py written." in new else ""

    run = hitl_team(
        {
            LEADER: [leader] * 12,
            "Builder_1": [
                recorded(builder_prompts, act(WRITE)),
                act(call("submit_plan", plan="1. write app.py")),
                "Plan 1 sent.",  # NOTE: the plan's id came back at once; the verdict wakes it
                act(WRITE),
                act(call("submit_plan", plan="1. write app.py 2. write test_app.py")),
                "Plan 2 sent.",
                act(WRITE),
                "app.py written.",
            ],
        },
        roles_dir=builder_roles(tmp_path),
    )
    project_file = run.team.runtime.project_folder(run.config) / "app.py"

    out = run.send("Build the app")

    assert run.interrupt_of(out) is None
    # Work tools before an approved plan: told to wait (twice: before the plan, and after the rejection).
    writes = run.tool_results("Builder_1", "write_file")
    assert [(m.status, error_of(m)) for m in writes[:2]] == [("error", PLAN_FIRST), ("error", PLAN_FIRST)]
    assert str(writes[2].content) == "Wrote 12 characters to app.py (version 1)." and writes[2].status != "error"
    assert project_file.read_text() == "print('hi')\n"
    # The plan's id comes back at once; the leader's decision reaches the member as a reply naming it.
    assert "- member_plan_1 (member_plan) from Builder_1: 1. write app.py" in leader_prompts[0]
    assert run.tool_texts("Builder_1", "submit_plan") == [
        plan_submitted("member_plan_1"),
        plan_submitted("member_plan_2"),
    ]
    verdicts = [(e["fields"]["to"], e["body"]) for e in envelopes_in(run, "Builder_1") if e["title"] == "Reply"]
    assert verdicts == [
        (
            "member_plan_1",
            "Your plan (member_plan_1) was rejected by Team Leader. Feedback: Add tests. "
            "Revise it and submit_plan again.",
        ),
        ("member_plan_2", "Your plan (member_plan_2) was approved by Team Leader."),
    ]
    assert {rid: r["status"] for rid, r in run.requests().items()} == {
        "member_plan_1": "rejected",
        "member_plan_2": "approved",
    }
    assert run.tool_texts(LEADER, "review_plan")[:2] == [
        "member_plan_1 (Builder_1) rejected.",
        "member_plan_2 (Builder_1) approved.",
    ]
    assert error_codes(run, LEADER, "review_plan") == [errors.ALREADY_ANSWERED]
    assert "Your role requires an approved plan" in builder_prompts[0]
    assert any(e["sender"] == "Builder_1" and e["body"] == "app.py written." for e in envelopes_in(run, LEADER))


def test_a_request_decided_earlier_in_the_same_step_cannot_be_decided_again(hitl_team):
    """Two review_plan calls on one request in one model turn: the second is refused."""
    run = hitl_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Clean up.")),
                "",
                act(
                    call("review_plan", request_id="approval_1", approve=True),
                    call("review_plan", request_id="approval_1", approve=False, feedback="No, wait."),
                    call("review_plan", request_id="approval_9", approve=True),
                ),
                "",
                "Done.",
            ],
            MEMBER: [act(call("request_approval", operation="delete old notes", reason="stale")), "Deleted."],
        },
    )

    run.send("Go")

    assert run.request("approval_1")["status"] == "approved"
    assert run.tool_texts(MEMBER, "request_approval") == ["approval_1 approved by Team Leader."]
    # The leader must not be told "rejected" for a request that was approved.
    reviews = run.tool_texts(LEADER, "review_plan")
    assert reviews[0] == "approval_1 (Researcher_1) approved."
    assert "approved" in reviews[1] and "rejected" not in reviews[1]
    assert error_codes(run, LEADER, "review_plan") == [errors.ALREADY_ANSWERED, errors.UNKNOWN_REQUEST]


def test_roles_without_require_plan_use_their_work_tools_at_once(hitl_team, tmp_path, team_home):
    run = hitl_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="researcher", task="Write notes.")), "", "Done."],
            MEMBER: [act(WRITE), "Notes written."],
        },
        roles_dir=builder_roles(tmp_path),
    )

    run.send("Go")

    assert run.tool_texts(MEMBER, "write_file") == ["Wrote 12 characters to app.py (version 1)."]
    assert (team_home / "project" / run.config["configurable"]["thread_id"] / "app.py").is_file()
    assert run.requests() == {}


# --- shutdown --------------------------------------------------------------------------------

LIST = act(call("list_files"))


def shutdown_team(hitl_team, member_turns: list, *, leader_after: list, timeout: float = 60):
    """The leader creates Researcher_1, then asks it to shut down while it works."""
    return hitl_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Research X.")),
                act(call("shutdown_request", display_name=MEMBER, reason="Your part is done.")),
                "",
                *leader_after,
            ],
            MEMBER: member_turns,
        },
        policy=Policy(shutdown_timeout=timeout),
    )


def shutdown_status(run) -> dict:
    return json.loads(run.tool_texts(LEADER, "check_shutdown_status")[0])


def test_shutdown_approved_the_member_finishes_its_step_and_shuts_down(hitl_team):
    run = shutdown_team(
        hitl_team,
        [
            LIST,
            LIST,
            act(
                call("list_files"),
                call("shutdown_response", request_id="shutdown_1", approve=True),
                content="Stopping.",
            ),
            "never played",
        ],
        leader_after=[
            act(
                call("check_shutdown_status", request_id="shutdown_1"),
                call("send_message_to_sub_agent", display_name=MEMBER, message="Still there?"),
            ),
            "Closed.",
        ],
    )

    out = run.send("Go")

    assert run.interrupt_of(out) is None
    # The request id at once, in the team protocols' words.
    assert run.tool_texts(LEADER, "shutdown_request") == [
        "Shutdown request shutdown_1 sent to 'Researcher_1' (status: pending)"
    ]
    request = next(e for e in envelopes_in(run, MEMBER) if e["tag"] == "ShutdownRequest")
    assert (request["sender"], request["fields"]["id"], request["body"]) == (LEADER, "shutdown_1", "Your part is done.")
    assert "shutdown_response" in request["fields"]["respond"]
    # It finished the step it answered in (both calls ran), then stopped for good.
    last_turn = [m for m in run.history(MEMBER) if isinstance(m, AIMessage)][-1]
    results = {m.tool_call_id: m for m in run.tool_results(MEMBER)}
    assert [c["name"] for c in last_turn.tool_calls] == ["list_files", "shutdown_response"]
    assert [results[c["id"]].status for c in last_turn.tool_calls] == ["success", "success"]
    assert run.tool_texts(MEMBER, "shutdown_response") == ["Shutdown approved: you stop after this step."]
    assert run.ai_count(MEMBER) == 3
    assert run.status(MEMBER) == "shutdown"
    record = run.request("shutdown_1")
    assert (record["kind"], record["from"], record["to"], record["status"]) == ("shutdown", LEADER, MEMBER, "approved")
    assert [MEMBER in t and "shutdown_1" in t for t in run.notices(LEADER, notices.SHUTDOWN_APPROVED)] == [True]
    status = shutdown_status(run)
    assert status == {
        "request_id": "shutdown_1",
        "target": MEMBER,
        "status": "approved",
        "answer": "",
        "timestamp": "2030-01-01T09:00:00+00:00",
        "deadline": "2030-01-01T09:01:00+00:00",
    }
    assert error_codes(run, LEADER, "send_message_to_sub_agent")[0] == errors.AGENT_ENDED


def test_shutdown_rejected_the_member_goes_on_and_the_leader_sees_why(hitl_team):
    run = shutdown_team(
        hitl_team,
        [
            LIST,
            act(call("shutdown_response", request_id="shutdown_1", approve=False)),
            act(call("shutdown_response", request_id="shutdown_1", approve=False, reason="Almost done, 1 step left.")),
            LIST,
            "Result: X explained.",
        ],
        leader_after=[act(call("check_shutdown_status", request_id="shutdown_1")), "", "Thanks."],
    )

    out = run.send("Go")

    assert run.interrupt_of(out) is None
    assert [error_of(m) for m in run.tool_results(MEMBER, "shutdown_response")] == [errors.BAD_ARGUMENT, None]
    assert run.tool_texts(MEMBER, "shutdown_response")[1] == "Shutdown rejected; go on with your work."
    record = run.request("shutdown_1")
    assert (record["status"], record["answer"]) == ("rejected", "Almost done, 1 step left.")
    [told] = run.notices(LEADER, notices.SHUTDOWN_REJECTED)
    assert "shutdown_1" in told and told.endswith(record["answer"])
    assert shutdown_status(run)["status"] == "rejected"
    assert shutdown_status(run)["answer"] == "Almost done, 1 step left."
    # It went on working and delivered its result.
    assert run.ai_count(MEMBER) == 5
    assert run.status(MEMBER) == "idle"
    assert any(e["sender"] == "Researcher_1" and e["body"] == "Result: X explained." for e in envelopes_in(run, LEADER))


def test_a_member_that_does_not_answer_within_the_timeout_is_terminated_and_the_request_expires(hitl_team, fake_clock):
    def after(seconds: float, turn):
        def step(messages):
            fake_clock.advance(seconds)
            return turn

        return step

    run = shutdown_team(
        hitl_team,
        [
            LIST,
            after(59, LIST),  # 59 s after the request: still in time
            after(2, LIST),  # 61 s: past the deadline once this step ends
            LIST,
            "never played",
        ],
        leader_after=[act(call("check_shutdown_status", request_id="shutdown_1")), "Noted."],
        timeout=60,
    )

    out = run.send("Go")

    assert run.interrupt_of(out) is None
    assert run.ai_count(MEMBER) == 3
    assert run.status(MEMBER) == "terminated"
    record = run.request("shutdown_1")
    assert (record["status"], record["answer"]) == ("expired", "did not answer shutdown_1 within 60 s")
    assert record["deadline"] == "2030-01-01T09:01:00+00:00"
    assert record["closed_at"] == "2030-01-01T09:01:01+00:00"
    [told] = run.notices(LEADER, notices.SHUTDOWN_EXPIRED)
    assert MEMBER in told and "shutdown_1" in told
    assert shutdown_status(run)["status"] == "expired"
    assert run.values["messages"][-1].content == "Noted."


def test_a_member_that_ends_its_turn_without_answering_is_terminated_and_the_request_expires(hitl_team):
    run = shutdown_team(
        hitl_team,
        [LIST, LIST, "My findings: X is Y.", "never played"],
        leader_after=["", "Noted."],
    )

    out = run.send("Go")

    assert run.interrupt_of(out) is None
    assert run.status(MEMBER) == "terminated"
    record = run.request("shutdown_1")
    assert (record["status"], record["answer"]) == ("expired", "ended its turn without answering shutdown_1")
    inbox = "\n".join(run.inbox_texts(LEADER))
    assert any(e["sender"] == "Researcher_1" and e["body"] == "My findings: X is Y." for e in envelopes_in(run, LEADER))
    [told] = run.notices(LEADER, notices.SHUTDOWN_EXPIRED)
    assert MEMBER in told and "shutdown_1" in told and inbox


def test_shutdown_tools_refuse_unknown_members_and_ids(hitl_team):
    run = hitl_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Research X.")),
                act(
                    call("shutdown_request", display_name="Ghost_1"),
                    call("check_shutdown_status", request_id="shutdown_9"),
                ),
                "",
                "Done.",
            ],
            MEMBER: [act(call("shutdown_response", request_id="shutdown_3", approve=True)), "Result."],
        },
    )

    run.send("Go")

    assert error_codes(run, LEADER, "shutdown_request") == [errors.UNKNOWN_AGENT]
    assert error_codes(run, LEADER, "check_shutdown_status") == [errors.UNKNOWN_REQUEST]
    assert error_codes(run, MEMBER, "shutdown_response") == [errors.UNKNOWN_REQUEST]
    assert run.requests() == {}
    assert run.status(MEMBER) == "idle"
