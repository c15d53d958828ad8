"""Scenario tests of the collaboration tool set (docs/protocols.md, "Collaboration").

``call_agent``, ``call_agents``, ``assign_agent_work``, and the calls they refuse.
``send_message``'s typed messages and deadlock breaking are in ``test_messages.py``;
delivery records, bounces, what the leader sees of peer traffic and exactly-once
delivery across a crash or a pause, in ``test_delivery.py``.

Every scenario runs a whole team with a ScriptedChatModel (an agent's turn index is
the number of AI messages already in its history) and a FakeClock. ``clocked_team``
(conftest.py) checks after every run that each history holds each message once, that
histories were only appended to, and that the delivery records match the histories.
"""

from __future__ import annotations

import pytest
from collab_fixtures import CREATE_PM_AND_RESEARCHERS, LEADER, PM, R1, R2, call_envelope
from fidelity_fixtures import (
    brief,
    briefs_in,
    envelopes_in,
)
from scripting import (
    act,
    call,
    error_codes,
    errors_of,
    quiet,
    types,
)

from teamgraph import Policy
from teamgraph.tools import errors

# --- call_agent ------------------------------------------------------------------------------


def test_call_agent_sends_the_seed_000_fields_and_the_reply_is_the_callers_tool_result(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_PM_AND_RESEARCHERS, *quiet()],
            PM: [
                act(
                    call(
                        "call_agent",
                        receiver=R1,
                        content="List the risks of the launch.",
                        project_name="launch",
                        task_name="risks",
                        files=["notes/risks.md", "plan.md"],
                    )
                ),
                "Risks collected.",
            ],
            R1: ["Risk: scope creep."],
        }
    )
    run.send("Prepare the launch")

    assert briefs_in(run, R1) == [
        call_envelope(
            PM,
            "ask_1",
            "sender: Project Manager_1\nreceiver: Researcher_1\nproject_name: launch\n"
            "files: notes/risks.md, plan.md (in the project folder: read them with read_file)\ntask_name: risks\n---\n"
            "List the risks of the launch.",
        )
    ]
    # The caller waited: its next step saw the reply as the call's result, not as a message.
    assert types(run.history(PM)) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert run.tool_result(PM, "call_agent") == "Researcher_1 replied (out_1):\nRisk: scope creep."
    record = run.request("ask_1")
    assert (record["kind"], record["from"], record["to"], record["tool"], record["status"]) == (
        "question",
        PM,
        R1,
        "call_agent",
        "answered",
    )
    assert run.status(R2) == "idle" and run.history(R2) == []


def test_the_leader_calls_a_member_and_gets_its_reply_as_the_tool_result(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("call_agent", receiver=R1, content="Summarize the brief.", task_name="brief")),
                "The brief is summarized.",
            ],
            R1: ["Brief: build a login page."],
        }
    )
    run.send("Summarize the brief")

    assert run.tool_result(LEADER, "call_agent") == "Researcher_1 replied (out_1):\nBrief: build a login page."
    assert briefs_in(run, R1)[0][:4] == ("Call", LEADER, "ask_1", "Call")
    # The reply reached the leader once: as its tool result, not again as a result message.
    assert not any(e["title"] == "Result" and e["sender"] == R1 for e in envelopes_in(run, LEADER))
    assert run.user_replies() == ["The brief is summarized."]


def test_a_call_answered_with_answer_other_agent_gets_that_answer(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_PM_AND_RESEARCHERS, *quiet()],
            PM: [act(call("call_agent", receiver=R1, content="Which port?")), "Port noted."],
            R1: [
                act(call("answer_other_agent", question_id="ask_1", answer="Port 8080.")),
                "Answered the Project Manager.",
            ],
        }
    )
    run.send("Go")

    assert run.tool_result(R1, "answer_other_agent") == "Answered ask_1 (Project Manager_1)."
    assert run.tool_result(PM, "call_agent") == "Port 8080."
    assert run.request("ask_1")["status"] == "answered"


# --- call_agents -------------------------------------------------------------------------------


def test_call_agents_runs_the_receivers_in_one_superstep_and_returns_every_reply_together(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_PM_AND_RESEARCHERS, *quiet()],
            PM: [
                act(call("call_agents", receivers=[R1, R2], content="One fact each.", project_name="facts")),
                "Collected both facts.",
            ],
            # Researcher_1 needs two steps: the call waits for the slower receiver.
            R1: [act(call("list_files")), "Fact A."],
            R2: ["Fact B."],
        }
    )
    steps = run.supersteps("Collect facts")
    run.check_histories()

    first_steps = [ran for _, ran in steps if R1 in ran or R2 in ran]
    assert set(first_steps[0]) >= {R1, R2}, f"the receivers ran in different supersteps: {steps}"
    for name in (R1, R2):
        assert briefs_in(run, name) == [
            call_envelope(
                PM,
                "ask_1" if name == R1 else "ask_2",
                f"sender: {PM}\nreceiver: {name}\nproject_name: facts\n---\nOne fact each.",
            )
        ]
    # One result, once the last reply is in, holding every reply.
    assert types(run.history(PM)) == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    result = run.tool_result(PM, "call_agents")
    assert result == (
        "[Researcher_1 · ask_1 · answered]\nResearcher_1 replied (out_2):\nFact A.\n\n"
        "[Researcher_2 · ask_2 · answered]\nResearcher_2 replied (out_1):\nFact B."
    )
    assert [run.request(r)["status"] for r in ("ask_1", "ask_2")] == ["answered", "answered"]


# --- assign_agent_work ------------------------------------------------------------------------


@pytest.mark.parametrize("with_plan", [True, False], ids=["approved-plan", "no-plan"])
def test_assign_agent_work_delivers_the_task_and_puts_it_on_the_board_if_there_is_one(clocked_team, with_plan):
    plan = call("propose_plan", summary="Compare the options.", steps=[{"title": "Survey", "role_id": "researcher"}])
    assign = call(
        "assign_agent_work",
        agent=R1,
        task="Compare option A and option B.",
        project_name="options",
        task_name="Compare options",
        files=["brief.md"],
    )
    run = clocked_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher"), *([plan] if with_plan else [])),
                act(assign),
                *quiet(),
            ],
            R1: ["Option A wins."],
        },
        policy=Policy(plan="leader"),
    )
    run.send("Pick an option")

    assert briefs_in(run, R1) == [
        brief(
            "Task",
            LEADER,
            "Task",
            "sender: Team Leader\nreceiver: Researcher_1\n"
            "project_name: options\nfiles: brief.md (in the project folder: read them with read_file)\n"
            "task_name: Compare options\n---\n"
            "Compare option A and option B.",
        )
    ]
    team = run.values["team"]
    if with_plan:
        assert run.tool_result(LEADER, "assign_agent_work") == "Work assigned to Researcher_1. It is on the task board."
        # NOTE: the board follows the work: the member did the task assigned to it, then ended its turn.
        assert [(t["id"], t["title"], t.get("assignee"), t["status"]) for t in team["board"]] == [
            ("task_1", "Survey", None, "todo"),
            ("task_2", "Compare options", R1, "done"),
        ]
    else:
        assert run.tool_result(LEADER, "assign_agent_work") == "Work assigned to Researcher_1."
        assert "board" not in team
    assert any(
        e["title"] == "Result" and e["sender"] == R1 and e["body"] == "Option A wins."
        for e in envelopes_in(run, LEADER)
    )


def test_only_the_master_and_the_task_manager_assign_work(clocked_team):
    run = clocked_team(
        {
            LEADER: [CREATE_PM_AND_RESEARCHERS, *quiet()],
            PM: [act(call("assign_agent_work", agent=R1, task="Do the survey.")), "Could not assign."],
        }
    )
    run.send("Go")

    assert error_codes(run, PM) == [errors.FORBIDDEN]
    assert "task-manager" in errors_of(run, PM)[0]  # NOTE: it says who may
    assert run.history(R1) == [] and run.status(R1) == "idle"


# --- refused calls ---------------------------------------------------------------------------


def test_calling_the_master_or_yourself_is_refused_and_the_error_says_so(clocked_team):
    run = clocked_team(
        {
            LEADER: [
                CREATE_PM_AND_RESEARCHERS,
                act(
                    call("call_agent", receiver=LEADER, content="Hello me."),
                    call("assign_agent_work", agent=LEADER, task="Work, me."),
                ),
                *quiet(),
            ],
            PM: [
                act(
                    call("call_agent", receiver=LEADER, content="Which database?"),
                    call("call_agent", receiver=PM, content="Talking to myself."),
                    call("call_agents", receivers=[R1, LEADER], content="Both of you."),
                    call("call_agents", receivers=[R1, PM], content="Me too."),
                    call("call_agent", receiver="Researcher_9", content="Anyone?"),
                ),
                "Nobody called.",
            ],
        }
    )
    run.send("Go")

    master, yourself = errors.NOT_A_MEMBER, errors.SELF_ADDRESS
    assert error_codes(run, PM) == [master, yourself, master, yourself, errors.UNKNOWN_AGENT]
    unknown = errors_of(run, PM)[-1]
    assert "'Researcher_9'" in unknown and all(name in unknown for name in (PM, R1, R2))  # NOTE: who there is
    assert error_codes(run, LEADER) == [master, master]
    # Nothing was sent: no request, and nobody else was woken.
    assert run.requests() == {}
    assert run.history(R1) == [] and run.history(R2) == []


@pytest.mark.parametrize(
    "args, code",
    [
        ({"project_name": "escape", "files": ["../secret.txt"]}, errors.FORBIDDEN),
        ({"project_name": "escape", "files": ["notes/../../other/plan.md"]}, errors.FORBIDDEN),
        ({"project_name": "escape", "files": ["/etc/passwd"]}, errors.FORBIDDEN),
        ({"project_name": "escape", "files": ["link/secret.txt"]}, errors.FORBIDDEN),
        ({"project_name": "escape", "files": ["ok.md", "../../../home.db"]}, errors.FORBIDDEN),
        ({"project_name": "../escape", "files": ["notes.md"]}, errors.BAD_ARGUMENT),
    ],
    ids=["parent", "dotdot-inside", "absolute", "symlink-out", "one-bad-of-two", "bad-project"],
)
@pytest.mark.parametrize("tool", ["call_agent", "call_agents", "assign_agent_work"])
def test_files_outside_project_folder_are_refused(clocked_team, tmp_path, args, code, tool):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    if tool == "call_agent":
        sent = call("call_agent", receiver=R1, content="Read these.", **args)
    elif tool == "call_agents":
        sent = call("call_agents", receivers=[R1, R2], content="Read these.", **args)
    else:
        sent = call("assign_agent_work", agent=R1, task="Read these.", **args)
    run = clocked_team(
        {LEADER: [CREATE_PM_AND_RESEARCHERS, *quiet()], PM: [act(sent), "Refused."]}
        if tool != "assign_agent_work"
        else {LEADER: [CREATE_PM_AND_RESEARCHERS, act(sent), *quiet()], PM: ["Coordinating."]}
    )
    project = run.team.runtime.project_folder(run.config)  # NOTE: files resolve in the thread's folder
    if not (project / "link").exists():
        (project / "link").symlink_to(outside, target_is_directory=True)
    run.send("Go")

    caller = LEADER if tool == "assign_agent_work" else PM
    assert error_codes(run, caller) == [code]
    assert run.requests() == {}
    assert run.history(R1) == [] and run.history(R2) == []
