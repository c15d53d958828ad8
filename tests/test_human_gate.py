"""Human in the loop: the human gate (one interrupt, partial answers, refused values) and when the team pauses.

Scenarios run as ``test_hitl.py`` describes (``hitl_team``, conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fidelity_fixtures import envelopes_in
from hitl_fixtures import APPROVE_SHAPE, LEADER, MEMBER, STRING_SHAPE, create, member_request_team
from scripting import act, call

from teamgraph import Policy
from teamgraph.graph.guarded import ResumeValueError

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
