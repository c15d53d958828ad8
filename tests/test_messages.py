"""Scenario tests of ``send_message``'s typed messages (docs/protocols.md, "Message types") and of deadlock breaking.

Scenarios run as ``test_collaboration.py`` describes (``clocked_team``, conftest.py).
"""

from __future__ import annotations

import pytest
from collab_fixtures import CREATE_PM_AND_RESEARCHERS, LEADER, PM, R1, R2, R3, TM
from fidelity_fixtures import (
    brief,
    briefs_in,
    envelopes_in,
    has_envelope,
)
from langchain_core.messages import AIMessage
from scripting import (
    act,
    call,
    chunks,
    error_codes,
    errors_of,
    on_message,
    quiet,
)

from teamgraph.messaging.results import plan_submitted
from teamgraph.tools import errors
from teamgraph.tools.protocols import MESSAGE_TYPES

# --- send_message: the message types of docs/protocols.md ---------------------------------------------------


def test_broadcast_reaches_every_active_member_once(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(*CREATE_PM_AND_RESEARCHERS["tool_calls"], call("create_sub_agent", role_id="researcher")),
                act(call("terminate_sub_agent", display_name=R3)),
                *quiet(),
            ],
            PM: [
                act(call("list_files")),  # the broadcast goes out after Researcher_3 was terminated
                act(call("send_message", to="*", content="Stand-up at 10.", msg_type="broadcast")),
                "Broadcast sent.",
            ],
            R1: ["Noted."],
            R2: ["Noted too."],
        }
    )
    run.send("Go")

    assert run.tool_result(PM, "send_message") == "Broadcast to 2 member(s): Researcher_1, Researcher_2."
    envelope = brief("Message", PM, "Message", "Stand-up at 10.")
    for name in (R1, R2):
        assert briefs_in(run, name) == [envelope]
    assert run.history(R3) == []
    assert envelope not in briefs_in(run, LEADER)
    sent = [d for d in run.deliveries().values() if d["sender"] == PM and d["to"] != LEADER]
    assert sorted((d["to"], d["status"]) for d in sent) == [(R1, "read"), (R2, "read")]


def test_an_unknown_message_type_is_an_error_that_lists_the_valid_types(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_PM_AND_RESEARCHERS, *quiet()],
            PM: [act(call("send_message", to=R1, content="Hey!", msg_type="shout")), "Gave up."],
        }
    )
    run.send("Go")

    assert error_codes(run, PM) == [errors.BAD_ARGUMENT]
    assert all(kind in errors_of(run, PM)[0] for kind in MESSAGE_TYPES)  # NOTE: it lists the valid types
    assert run.history(R1) == []
    assert not any(d["sender"] == PM and d["to"] == R1 for d in run.deliveries().values())


def test_a_plain_message_reaches_a_peer_and_the_leader(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_PM_AND_RESEARCHERS, *quiet()],
            PM: [
                act(
                    call("send_message", to=R1, content="Start with the survey."),
                    call("send_message", to=LEADER, content="Research has started.", msg_type="message"),
                ),
                "Messages sent.",
            ],
            R1: ["On it."],
        }
    )
    run.send("Go")

    assert run.tool_texts(PM, "send_message") == ["Message sent to Researcher_1.", "Message sent to Team Leader."]
    assert briefs_in(run, R1) == [brief("Message", PM, "Message", "Start with the survey.")]
    assert brief("Message", PM, "Message", "Research has started.") in briefs_in(run, LEADER)


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
def test_shutdown_request_and_shutdown_response_are_message_types(clocked_team, approve):
    response = call(
        "send_message",
        to=LEADER,
        content="" if approve else "I still have notes to write.",
        msg_type="shutdown_response",
        request_id="shutdown_1",
        approve=approve,
    )
    run = clocked_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("send_message", to=R1, content="Your part is done.", msg_type="shutdown_request")),
                *quiet(),
            ],
            R1: [
                act(
                    call(
                        "send_message",
                        to=LEADER,
                        content="",
                        msg_type="shutdown_response",
                        request_id="shutdown_1",
                        approve=False,
                    ),
                    response,
                ),
                "Bye." if approve else "Writing my notes.",
            ],
        }
    )
    run.send("Wrap up")

    assert (
        run.tool_result(LEADER, "send_message")
        == "Shutdown request shutdown_1 sent to 'Researcher_1' (status: pending)"
    )
    assert briefs_in(run, R1)[0] == brief(
        "Shutdown request", LEADER, "ShutdownRequest", "Your part is done.", "shutdown_1"
    )
    assert error_codes(run, R1) == [errors.BAD_ARGUMENT]
    record = run.request("shutdown_1")
    if approve:
        assert record["status"] == "approved"
        assert run.status(R1) == "shutdown"
        assert "Notice · Researcher_1 approved shutdown_1 and shut down." in chunks(run, LEADER)
    else:
        assert (record["status"], record["answer"]) == ("rejected", "I still have notes to write.")
        assert run.status(R1) == "idle"
        assert "Notice · Researcher_1 rejected shutdown_1: I still have notes to write." in chunks(run, LEADER)


def test_plan_approval_response_decides_a_members_plan(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Survey the options.")),
                *[
                    on_message(
                        {
                            "id: member_plan_1": act(
                                call(
                                    "send_message",
                                    to=R1,
                                    content="Add a comparison table.",
                                    msg_type="plan_approval_response",
                                    request_id="member_plan_1",
                                    approve=False,
                                )
                            ),
                            "id: member_plan_2": act(
                                call(
                                    "send_message",
                                    to=R1,
                                    content="",
                                    msg_type="plan_approval_response",
                                    request_id="member_plan_2",
                                    approve=True,
                                )
                            ),
                        }
                    )
                ]
                * 10,
            ],
            R1: [
                act(call("submit_plan", plan="1. Read. 2. Summarize.")),
                "Plan sent.",  # NOTE: the plan's id came back at once: it ends its turn; the verdict wakes it
                act(call("submit_plan", plan="1. Read. 2. Tabulate. 3. Summarize.")),
                "Revised plan sent.",
                "Survey done.",
            ],
        }
    )
    run.send("Survey")

    assert run.tool_texts(LEADER, "send_message") == [
        "plan_approval_response for member_plan_1 sent (reject).",
        "plan_approval_response for member_plan_2 sent (approve).",
    ]
    assert run.tool_texts(R1, "submit_plan") == [plan_submitted("member_plan_1"), plan_submitted("member_plan_2")]
    verdicts = {e["fields"]["to"]: e["body"] for e in envelopes_in(run, R1) if e["title"] == "Reply"}
    assert verdicts == {
        "member_plan_1": (
            "Your plan (member_plan_1) was rejected by Team Leader. Feedback: Add a comparison table. "
            "Revise it and submit_plan again."
        ),
        "member_plan_2": "Your plan (member_plan_2) was approved by Team Leader.",
    }
    assert [run.request(r)["status"] for r in ("member_plan_1", "member_plan_2")] == ["rejected", "approved"]


# --- deadlocks ---------------------------------------------------------------------------------


def test_two_members_calling_each_other_in_one_superstep_is_a_cycle_the_router_breaks(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(
                    call(
                        "create_sub_agent",
                        role_id="project-manager",
                        task="Agree the milestones with the Task Manager.",
                    ),
                    call(
                        "create_sub_agent",
                        role_id="task-manager",
                        task="Agree the milestones with the Project Manager.",
                    ),
                ),
                *quiet(),
            ],
            PM: [act(call("call_agent", receiver=TM, content="Which milestones?")), "Milestones agreed.", "Done."],
            TM: [act(call("call_agent", receiver=PM, content="Which deadlines?")), "M1 and M2.", "Done."],
        }
    )
    steps = run.supersteps("Plan the milestones")
    run.check_histories()

    assert any({PM, TM} <= set(ran) for _, ran in steps), steps
    # The newest wait (the Task Manager's) gets the error; the older one goes on.
    assert run.tool_result(TM, "call_agent") == (
        "Error: deadlock: Project Manager_1 waits for Task Manager_1 (ask_1), Task Manager_1 waits for "
        "Project Manager_1 (ask_2). This is a cycle, so this wait (the newest) was cancelled. Answer the "
        "questions waiting for you first, then ask again if you still need to."
    )
    assert [run.request(r)["status"] for r in ("ask_1", "ask_2")] == ["answered", "cancelled"]
    assert run.tool_result(PM, "call_agent") == "Task Manager_1 replied (out_1):\nM1 and M2."
    assert {n: r["status"] for n, r in run.agents().items()} == {LEADER: "idle", PM: "idle", TM: "idle"}
    assert all(not r["waits"] for r in run.agents().values())


def test_the_leader_waiting_on_a_member_that_waits_on_the_leader_is_a_cycle_the_router_breaks(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="project-manager", task="Set up the database.")),
                "",
                # It got the Project Manager's question, and calls the Project Manager instead of answering.
                act(call("call_agent", receiver=PM, content="What is your status?")),
                act(call("answer_sub_agent_question", question_id="ask_1", answer="Use Postgres.")),
                *quiet(),
            ],
            PM: [
                act(call("ask_master", question="Postgres or SQLite?")),
                "Database set up with Postgres.",
                "Status: done.",
            ],
        }
    )
    run.send("Set up the database")

    leader = run.history(LEADER)
    calling = next(
        i
        for i, m in enumerate(leader)
        if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["name"] == "call_agent"
    )
    assert has_envelope(str(leader[calling - 1].content), title="Question", sender=PM, id="ask_1")  # it was waited on
    assert run.tool_result(LEADER, "call_agent") == (
        "Error: deadlock: Project Manager_1 waits for Team Leader (ask_1), Team Leader waits for "
        "Project Manager_1 (ask_2). This is a cycle, so this wait (the newest) was cancelled. Answer the "
        "questions waiting for you first, then ask again if you still need to."
    )
    assert run.tool_result(PM, "ask_master") == "Team Leader answered: Use Postgres."
    assert [run.request(r)["status"] for r in ("ask_1", "ask_2")] == ["answered", "cancelled"]
    assert all(r["status"] == "idle" and not r["waits"] for r in run.agents().values())
