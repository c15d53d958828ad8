"""Scenario tests of the sessions tool set (docs/protocols.md, "Sessions").

``sessions_list``, ``sessions_send`` (blocking up to a time-out, then a late reply;
``timeoutSeconds=0`` fire-and-forget; the reply ping-pong and ``REPLY_SKIP``),
``sessions_spawn`` (background runs, result push, ``cleanup``, ``runTimeoutSeconds``,
``ANNOUNCE_SKIP``), the errors worded as docs/protocols.md, "Sessions" words them, and wait cycles that mix
tools.

Every built-in role has the sessions tools (docs/protocols.md, "Sessions"); the
``liaison`` role (conftest.py, ``tools: [member, files, protocols, sessions]``) is a
member role without the collaboration tools. Every
scenario runs a whole team with a ScriptedChatModel and a FakeClock that scripted
turns advance (``after_seconds``); ``clocked_team`` checks after every run that each
history holds each message once and that the delivery records match the histories.
"""

from __future__ import annotations

import json

import pytest
from fidelity_fixtures import env, envelopes_in, received
from scripting import act, after_seconds, call, chunks, error_codes, errors_of, quiet, types

from teamgraph import Policy
from teamgraph.messaging.results import timed_out
from teamgraph.tools import errors, tools_for_role
from teamgraph.tools.sessions import PURPOSES, unknown_target

LEADER = "Team Leader"
LIAISON, LIAISON_2 = "Liaison_1", "Liaison_2"
PM, TM = "Project Manager_1", "Task Manager_1"
R1, R2 = "Researcher_1", "Researcher_2"

COLLABORATION = {"call_agent", "call_agents", "assign_agent_work"}
SESSIONS = {"sessions_list", "sessions_send", "sessions_spawn"}

CREATE_LIAISON_AND_RESEARCHER = act(
    call("create_sub_agent", role_id="liaison", task="Work with the other sessions."),
    call("create_sub_agent", role_id="researcher"),
)


def ai_texts(run, name: str) -> list[str]:
    return [str(m.content) for m in run.history(name) if type(m).__name__ == "AIMessage" and not m.tool_calls]


def request_template(sender: str, receiver: str, body: str, *, timeout: str = "120", **fields: str) -> dict:
    """The fields of a sessions_send request (docs/protocols.md, "Sessions") as the receiver reads them back."""
    blocking = timeout != "0"
    return {
        "sender": f"{sender} ({'team-leader' if sender == LEADER else sender.rsplit('_', 1)[0].lower()})",
        "receiver": receiver,
        "source sessionKey": sender,
        "purpose": PURPOSES[blocking],
        "expected response": "blocking" if blocking else "fire-and-forget",
        "timeout": timeout,
        "user request": "(not given)",
        "message": body,
        "context summary": "(not given)",
        **fields,
    }


def question_envelope(body: str, *, timeout: str = "120") -> dict:
    return env("Question", LIAISON, "Ask", request_template(LIAISON, R1, body, timeout=timeout), id="ask_1")


def ping(sender: str, body: str, note: str) -> dict:
    """A ping-pong reply as the other side receives it."""
    return env("Reply", sender, "Reply", body, to="ask_1", note=note)


# --- who has which tools -------------------------------------------------------------------


def test_every_built_in_role_has_the_sessions_tools_and_managers_have_collaboration(clocked_team):
    runtime = clocked_team({}).team.runtime

    def names(role_id: str) -> set[str]:
        return {t.name for t in tools_for_role(runtime, runtime.roles[role_id])}

    assert names("team-leader") >= COLLABORATION | SESSIONS | {"send_message"}
    for role_id in ("project-manager", "task-manager"):
        assert names(role_id) >= COLLABORATION | SESSIONS | {"send_message"}
    for role_id in runtime.roles:
        assert names(role_id) >= SESSIONS, role_id
    assert names("liaison") >= SESSIONS | {"send_message"}
    assert not names("liaison") & COLLABORATION
    assert not names("researcher") & COLLABORATION


# --- sessions_list -------------------------------------------------------------------------


def test_sessions_list_shows_the_live_agents_and_their_keys(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(*CREATE_LIAISON_AND_RESEARCHER["tool_calls"], call("create_sub_agent", role_id="researcher")),
                act(call("terminate_sub_agent", display_name=R2)),
                *quiet(),
            ],
            LIAISON: [act(call("list_files")), act(call("sessions_list")), "Listed."],
        }
    )
    run.send("Go")

    assert json.loads(run.tool_result(LIAISON, "sessions_list")) == [
        {"sessionKey": LEADER, "role_id": "team-leader", "status": "running", "you": False},
        {"sessionKey": LIAISON, "role_id": "liaison", "status": "running", "you": True},
        {"sessionKey": R1, "role_id": "researcher", "status": "idle", "you": False},
    ]


# --- sessions_send -------------------------------------------------------------------------


def test_sessions_send_blocks_until_the_target_replies_within_the_time_out(clocked_team, fake_clock):
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [
                act(call("sessions_send", sessionKey=R1, message="What is 2+2?", timeoutSeconds=30)),
                "REPLY_SKIP",
            ],
            R1: [after_seconds(fake_clock, 10, act(call("list_files"))), "4."],
        }
    )
    run.send("Go")

    assert received(run, R1) == [question_envelope("What is 2+2?", timeout="30")]
    assert run.tool_result(LIAISON, "sessions_send") == "Researcher_1 replied (out_1):\n4."
    assert types(run.history(LIAISON)) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    record = run.request("ask_1")
    assert (record["tool"], record["status"], record["closed_at"]) == (
        "sessions_send",
        "answered",
        "2030-01-01T09:00:10+00:00",
    )
    assert "timed_out_at" not in record


def test_sessions_send_times_out_and_the_late_reply_reaches_the_caller_as_a_message(clocked_team, fake_clock):
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [
                act(call("sessions_send", sessionKey=R1, message="Check the logs.", timeoutSeconds=30)),
                "Going on with other work.",
                "Thanks for the logs.",
            ],
            R1: [after_seconds(fake_clock, 60, act(call("list_files"))), "The logs are clean."],
        },
        policy=Policy(timeout_retry_wait=0),  # NOTE: the sessions spec's own time-out, no retry stage
    )
    run.send("Go")

    timed_out_result = run.tool_result(LIAISON, "sessions_send")
    assert R1 in timed_out_result and "ask_1" in timed_out_result and "sessions_spawn" in timed_out_result
    assert timed_out_result == timed_out(R1, "ask_1", 30)  # docs/protocols.md, "Sessions": the time-out error
    assert run.request("ask_1")["timed_out_at"] == "2030-01-01T09:01:00+00:00"
    # The caller went on; the target kept working and its answer came later, as a message.
    assert types(run.history(LIAISON)) == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
    ]
    assert ai_texts(run, LIAISON) == ["Going on with other work.", "Thanks for the logs."]
    assert received(run, LIAISON)[1:] == [
        env("Late reply", R1, "Reply", "Researcher_1 replied (out_2):\nThe logs are clean.", to="ask_1")
    ]
    assert run.request("ask_1")["status"] == "answered"
    # A late reply starts no ping-pong: the caller's next message is not forwarded.
    assert received(run, R1) == [question_envelope("Check the logs.", timeout="30")]


def test_sessions_send_waits_the_whole_time_out_even_a_fractional_one(clocked_team, fake_clock):
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [
                act(call("sessions_send", sessionKey=R1, message="Quick check?", timeoutSeconds=1.5)),
                "REPLY_SKIP",
                "Ok.",
                "Ok.",
            ],
            # One second passes: less than the 1.5 s the caller agreed to wait.
            R1: [after_seconds(fake_clock, 1, act(call("list_files"))), "Checked."],
        }
    )
    run.send("Go")

    assert run.tool_result(LIAISON, "sessions_send") == "Researcher_1 replied (out_1):\nChecked."
    assert "timed_out_at" not in run.request("ask_1")


def test_time_out_zero_is_fire_and_forget(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [
                act(
                    call("sessions_send", sessionKey=R1, message="Deploy is at 5.", timeoutSeconds=0),
                    call("sessions_send", sessionKey=LEADER, message="Deploy scheduled.", timeoutSeconds=0),
                ),
                "Told everyone.",
            ],
            R1: ["Noted."],
        }
    )
    steps = run.supersteps("Go")
    run.check_histories()

    assert run.tool_texts(LIAISON, "sessions_send") == [
        "Sent to Researcher_1 (fire-and-forget): no reply expected.",
        "Sent to Team Leader (fire-and-forget): no reply expected.",
    ]
    assert received(run, R1) == [
        env("Message", LIAISON, "Message", request_template(LIAISON, R1, "Deploy is at 5.", timeout="0"))
    ]
    assert env(
        "Message", LIAISON, "Message", request_template(LIAISON, LEADER, "Deploy scheduled.", timeout="0")
    ) in received(run, LEADER)
    assert run.requests() == {}
    # The caller did not wait: its next step ran alongside the target's.
    assert any({LIAISON, R1} <= set(ran) for _, ran in steps), steps
    # And no reply comes back to it.
    assert received(run, LIAISON) == [env("Task", LEADER, "Task", "Work with the other sessions.")]


def test_a_target_that_fails_while_the_caller_waits_ends_the_wait_with_a_failure_result(clocked_team):
    def provider_down(messages):
        raise RuntimeError("provider down")

    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [act(call("sessions_send", sessionKey=R1, message="Check the logs.")), "Will check them myself."],
            R1: [provider_down],
        }
    )
    run.send("Go")

    assert "Researcher_1 is failed and did not answer." in run.tool_result(LIAISON, "sessions_send")
    assert run.request("ask_1")["status"] == "cancelled"
    assert run.status(R1) == "failed"
    assert "Notice · Researcher_1 failed: RuntimeError: provider down" in chunks(run, LEADER)
    assert ai_texts(run, LIAISON) == ["Will check them myself."]


# --- the reply ping-pong --------------------------------------------------------------------


@pytest.mark.parametrize("limit", [5, 2, 1])
def test_ping_pong_goes_back_and_forth_for_at_most_max_ping_pong_rounds(clocked_team, limit):
    policy = Policy() if limit == 5 else Policy(max_ping_pong=limit)
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [act(call("sessions_send", sessionKey=R1, message="Shall we use REST?")), "A1", "A2", "A3", "A4"],
            R1: ["B1", "B2", "B3", "B4"],
        },
        policy=policy,
    )
    run.send("Go")

    skip = " · reply REPLY_SKIP to stop"
    expected = {
        5: (
            [ping(R1, "B2", "ping-pong round 3/5" + skip), ping(R1, "B3", "ping-pong round 5/5")],
            [ping(LIAISON, "A1", "ping-pong round 2/5" + skip), ping(LIAISON, "A2", "ping-pong round 4/5" + skip)],
            (LIAISON, "A3"),
        ),
        2: ([], [ping(LIAISON, "A1", "ping-pong round 2/2")], (R1, "B2")),
        1: ([], [], (LIAISON, "A1")),
    }
    to_liaison, to_researcher, (last_speaker, last_words) = expected[limit]
    assert run.tool_result(LIAISON, "sessions_send") == "Researcher_1 replied (out_1):\nB1"
    assert received(run, LIAISON)[1:] == to_liaison
    assert received(run, R1) == [question_envelope("Shall we use REST?"), *to_researcher]
    # The first reply after the limit is not forwarded: it is an ordinary result for the leader.
    results = [e for e in envelopes_in(run, LEADER) if e["title"] == "Result"]
    assert (results[-1]["sender"], results[-1]["body"]) == (last_speaker, last_words)
    assert run.values["team"].get("conversations", {}) == {}
    if limit == 5:
        assert "Notice · Liaison_1 → Researcher_1 (ask_1, round 2): A1" in chunks(run, LEADER)


@pytest.mark.parametrize("side", ["requester", "target", "target-first-reply"])
def test_replying_exactly_reply_skip_ends_the_ping_pong(clocked_team, side):
    liaison = {"requester": ["REPLY_SKIP", "A2"], "target": ["A1", "A2"], "target-first-reply": ["A1", "A2"]}[side]
    researcher = {
        "requester": ["B1", "B2"],
        "target": ["B1", "REPLY_SKIP", "B3"],
        "target-first-reply": ["REPLY_SKIP", "B2"],
    }[side]
    spare = ["(spare turn)"] * 4  # so that a ping-pong that goes on too long fails an assertion, not the script
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [act(call("sessions_send", sessionKey=R1, message="Shall we use REST?")), *liaison, *spare],
            R1: [*researcher, *spare],
        }
    )
    run.send("Go")

    expected_to_researcher = (
        [ping(LIAISON, "A1", "ping-pong round 2/5 · reply REPLY_SKIP to stop")] if side == "target" else []
    )
    assert received(run, R1) == [question_envelope("Shall we use REST?"), *expected_to_researcher]
    assert received(run, LIAISON)[1:] == []
    assert run.values["team"].get("conversations", {}) == {}
    # REPLY_SKIP is a control word: it is never forwarded nor reported as a result.
    assert not any(e["body"] == "REPLY_SKIP" for n in (LEADER, LIAISON, R1) for e in envelopes_in(run, n))


# --- sessions_spawn -------------------------------------------------------------------------


@pytest.mark.parametrize("cleanup, end_status", [("keep", "idle"), ("delete", "terminated")])
def test_sessions_spawn_accepts_at_once_and_pushes_the_result_back(clocked_team, cleanup, end_status):
    run = clocked_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="liaison", task="Find the rate limit.")), *quiet()],
            LIAISON: [
                act(
                    call(
                        "sessions_spawn",
                        task="Find the API rate limit.",
                        label="rate-limit",
                        agentId="researcher",
                        cleanup=cleanup,
                    )
                ),
                "Waiting for the run.",
                "Rate limit noted.",
            ],
            R1: [act(call("list_files")), "100 requests per minute."],
        }
    )
    steps = run.supersteps("Go")
    run.check_histories()

    assert json.loads(run.tool_result(LIAISON, "sessions_spawn")) == {
        "status": "accepted",
        "runId": "run_1",
        "childSessionKey": R1,
    }
    # Non-blocking: the requester's next step runs alongside the child's first one.
    first_child_step = next(ran for _, ran in steps if R1 in ran)
    assert LIAISON in first_child_step, steps
    [task] = received(run, R1)
    assert (task["title"], task["sender"], task["tag"]) == ("Task", LIAISON, "Task")
    assert task["body"].endswith("\nFind the API rate limit.") and "rate-limit" in task["body"]
    assert received(run, LIAISON)[1:] == [env("Reply", R1, "Reply", "100 requests per minute.", to="run_1")]
    assert ai_texts(run, LIAISON) == ["Waiting for the run.", "Rate limit noted."]
    record = run.request("run_1")
    assert (record["kind"], record["from"], record["to"], record["status"], record["answer"]) == (
        "run",
        LIAISON,
        R1,
        "answered",
        "100 requests per minute.",
    )
    child = run.agents()[R1]
    assert (child["role"], child["created_by"], child["status"]) == ("researcher", LIAISON, end_status)
    # The result went to the requester; the leader only got a one-line notice of it.
    assert not any(e["title"] == "Result" and e["sender"] == R1 for e in envelopes_in(run, LEADER))
    assert "Notice · Researcher_1 finished run_1 for Liaison_1: 100 requests per minute." in chunks(run, LEADER)


@pytest.mark.parametrize("agent_id, child", [(None, LIAISON_2), (R1, R1)], ids=["own-role", "existing-session"])
def test_sessions_spawn_runs_on_a_new_agent_of_the_callers_role_or_an_existing_session(clocked_team, agent_id, child):
    spawn = (
        call("sessions_spawn", task="Summarize the notes.")
        if agent_id is None
        else call("sessions_spawn", task="Summarize the notes.", agentId=agent_id)
    )
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [act(spawn), "Waiting.", "Summary received."],
            child: ["Summary: all good."],
        }
    )
    run.send("Go")

    assert json.loads(run.tool_result(LIAISON, "sessions_spawn"))["childSessionKey"] == child
    assert set(run.agents()) == {LEADER, LIAISON, R1} | {child}
    assert run.agents()[child]["role"] == ("liaison" if agent_id is None else "researcher")
    assert env("Reply", child, "Reply", "Summary: all good.", to="run_1") in received(run, LIAISON)


def test_run_time_out_stops_the_child_and_tells_the_requester(clocked_team, fake_clock):
    run = clocked_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="liaison", task="Delegate the survey.")), *quiet()],
            LIAISON: [
                act(call("sessions_spawn", task="Survey every option.", agentId="researcher", runTimeoutSeconds=10)),
                "Waiting.",
                "The survey timed out; I will narrow it.",
            ],
            R1: [after_seconds(fake_clock, 30, act(call("list_files"))), "Survey done (too late)."],
        }
    )
    run.send("Go")

    assert chunks(run, LIAISON)[1:] == [
        "Notice · run_1 timed out: Researcher_1 was stopped before it finished. Its partial work is in its history."
    ]
    record = run.request("run_1")
    assert (record["status"], record["closed_at"]) == ("expired", "2030-01-01T09:00:30+00:00")
    assert run.status(R1) == "stopped"
    assert types(run.history(R1)) == ["HumanMessage", "AIMessage", "ToolMessage"]  # stopped mid-run
    assert not any("Survey done" in c for c in chunks(run, LIAISON) + chunks(run, LEADER))


def test_a_child_that_answers_announce_skip_posts_no_result(clocked_team):
    run = clocked_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="liaison", task="Delegate the clean-up.")), *quiet()],
            LIAISON: [act(call("sessions_spawn", task="Delete the temp files.", cleanup="delete")), "Delegated."],
            LIAISON_2: [act(call("list_files")), "ANNOUNCE_SKIP"],
        }
    )
    run.send("Go")

    assert json.loads(run.tool_result(LIAISON, "sessions_spawn"))["childSessionKey"] == LIAISON_2
    assert run.request("run_1")["status"] == "answered"
    assert received(run, LIAISON) == [env("Task", LEADER, "Task", "Delegate the clean-up.")]
    assert not any(e["sender"] == LIAISON_2 for e in envelopes_in(run, LEADER))
    assert run.status(LIAISON_2) == "terminated"  # cleanup still applies


def test_the_leader_uses_sessions_send_and_sessions_spawn(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("sessions_send", sessionKey=R1, message="Status?", timeoutSeconds=60)),
                act(call("sessions_spawn", task="Write the summary.", agentId="researcher", cleanup="delete")),
                *quiet(),
            ],
            R1: ["All good.", "Still good."],
            R2: ["Summary written."],
        }
    )
    run.send("Go")

    assert run.tool_result(LEADER, "sessions_send") == "Researcher_1 replied (out_1):\nAll good."
    assert json.loads(run.tool_result(LEADER, "sessions_spawn")) == {
        "status": "accepted",
        "runId": "run_2",
        "childSessionKey": R2,
    }
    seen = received(run, LEADER)
    assert seen.count(env("Reply", R2, "Reply", "Summary written.", to="run_2")) == 1
    assert not any(e["title"] == "Result" for e in envelopes_in(run, LEADER))
    assert len(run.inbox_texts(R1)) == 1  # no ping-pong with the leader
    assert run.status(R2) == "terminated"


# --- errors, worded as the sessions spec words them --------------------------------------------------


def test_sessions_errors_name_the_problem_and_what_to_do(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(*CREATE_LIAISON_AND_RESEARCHER["tool_calls"], call("create_sub_agent", role_id="researcher")),
                act(call("terminate_sub_agent", display_name=R2)),
                *quiet(),
            ],
            LIAISON: [
                act(call("list_files")),  # the next step comes after Researcher_2 was terminated
                act(
                    call("sessions_send", sessionKey="Researcher_9", message="Hi"),
                    call("sessions_send", sessionKey=R2, message="Hi"),
                    call("sessions_send", sessionKey=LIAISON, message="Hi"),
                    call("sessions_send", sessionKey=LEADER, message="Approve?"),
                    call("sessions_send", sessionKey=R1, message="Hi", timeoutSeconds=-1),
                    call("sessions_spawn", task="Do it.", agentId="wizard"),
                    call("sessions_spawn", task="Do it.", agentId="team-leader"),
                    call("sessions_spawn", task="Do it.", agentId=R2),
                    call("sessions_spawn", task="Do it.", agentId="researcher", runTimeoutSeconds=-5),
                ),
                "Nothing worked.",
            ],
        }
    )
    run.send("Go")

    assert error_codes(run, LIAISON) == [
        errors.UNKNOWN_AGENT,
        errors.AGENT_ENDED,
        errors.SELF_ADDRESS,
        errors.WRONG_TOOL,
        errors.BAD_ARGUMENT,
        errors.UNKNOWN_ROLE,
        errors.UNKNOWN_ROLE,
        errors.AGENT_ENDED,
        errors.BAD_ARGUMENT,
    ]
    # NOTE: worded as the sessions spec words it, listing the live sessions
    assert errors_of(run, LIAISON)[0] == "Error: " + unknown_target("Researcher_9", [LEADER, R1])
    assert run.requests() == {}
    assert set(run.agents()) == {LEADER, LIAISON, R1, R2}
    assert run.history(R1) == []


# --- deadlocks across tools ------------------------------------------------------------------


def test_a_cycle_of_three_blocking_waits_across_tools_is_broken_at_the_newest_wait(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="project-manager", task="Ask the Task Manager."),
                    call("create_sub_agent", role_id="task-manager", task="Ask the Liaison."),
                    call("create_sub_agent", role_id="liaison", task="Ask the Project Manager."),
                ),
                *quiet(),
            ],
            PM: [act(call("call_agent", receiver=TM, content="Dates?")), "PM: dates agreed.", *["REPLY_SKIP"] * 4],
            TM: [act(call("call_agent", receiver=LIAISON, content="Owners?")), "TM: May 1.", *["TM: noted."] * 4],
            LIAISON: [
                act(call("sessions_send", sessionKey=PM, message="Scope?", timeoutSeconds=300)),
                *["REPLY_SKIP"] * 5,
            ],
        }
    )
    run.send("Go")

    # NOTE: the three waits were opened in the same pass (concurrently): the tie is
    # broken by name, never by creation order, so Task Manager_1's wait is "newest".
    chain = run.tool_result(TM, "call_agent")
    assert chain.startswith("Error: deadlock:") and "Task Manager_1 waits for Liaison_1 (ask_2)" in chain
    assert [run.request(r)["status"] for r in ("ask_1", "ask_2", "ask_3")] == ["answered", "cancelled", "answered"]
    assert run.tool_result(PM, "call_agent") == "Task Manager_1 replied (out_1):\nTM: May 1."
    assert run.tool_result(LIAISON, "sessions_send").startswith("Project Manager_1 replied (out_2):")
    assert all(not r["waits"] for r in run.agents().values())
