"""Scenario tests of the router: naming, delivery, parallel steps, no hangs, bounces.

Everything runs through ``graph.invoke`` / ``graph.stream`` with ScriptedChatModel
scripts (an agent's turn index is the number of AI messages in its history).
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from fidelity_fixtures import env, envelopes_in, has_envelope, parsed
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from scripting import act, call, error_codes, reply_when_done, types

from teamgraph import Policy, RoleFileError
from teamgraph.messaging import notices
from teamgraph.tools import errors

LEADER = "Team Leader"


def busy(steps: int, final: str) -> list:
    """A member turn of ``steps`` tool steps, then a final answer."""
    return [act(call("list_files"))] * steps + [final]


# --- instance naming --------------------------------------------------------------


def test_instances_are_numbered_per_role_from_one_and_never_reused(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator"),
                    call("create_sub_agent", role_id="ui-operator"),
                    call("create_sub_agent", role_id="researcher"),
                ),
                act(call("terminate_sub_agent", display_name="UI Operator_2")),
                act(
                    call("create_sub_agent", role_id="ui-operator"),
                    call("create_sub_agent", role_id="full-stack-engineer"),
                ),
                act(call("terminate_sub_agent", display_name="UI Operator_3")),
                act(call("create_sub_agent", role_id="ui-operator")),
                "Team ready.",
            ]
        }
    )
    created = [str(m.content) for m in run.tool_results(LEADER, "create_sub_agent")]
    names = [re.match(r"Created (.+?) \(", text).group(1) for text in created]
    assert names == [
        "UI Operator_1",
        "UI Operator_2",
        "Researcher_1",
        "UI Operator_3",
        "Full-Stack Engineer_1",
        "UI Operator_4",
    ]
    agents = run.agents()
    assert list(agents) == [LEADER, *names]
    assert {n: a["status"] for n, a in agents.items() if a["status"] == "terminated"} == {
        "UI Operator_2": "terminated",
        "UI Operator_3": "terminated",
    }
    assert all(agents[n]["role"] == "ui-operator" for n in names if n.startswith("UI Operator"))


def test_numbering_continues_on_the_next_user_message(make_team):
    run = make_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("terminate_sub_agent", display_name="Researcher_1")),
                "First team done.",
                act(call("create_sub_agent", role_id="researcher")),
                "Second team ready.",
            ]
        }
    )
    run.send("First task")
    run.send("Second task")
    assert list(run.agents()) == [LEADER, "Researcher_1", "Researcher_2"]
    assert run.status("Researcher_1") == "terminated"
    assert run.status("Researcher_2") == "idle"


def test_two_roles_with_the_same_display_name_never_share_an_instance(make_team, tmp_path):
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "ui-designer.md").write_text(
        "---\nid: ui-designer\nname: UI Operator\ndescription: Designs screens.\n---\nYou design screens.\n"
    )
    try:
        run = make_team(
            {
                LEADER: [
                    act(call("create_sub_agent", role_id="ui-operator", task="Design A.")),
                    act(call("create_sub_agent", role_id="ui-designer", task="Design B.")),
                    *[""] * 8,
                ],
                "*": ["Done.", "Done again.", "Done once more."],
            },
            roles_dir=roles,
        )
    except RoleFileError as exc:  # refusing the ambiguous role file is a fix too
        assert "UI Operator" in str(exc)
        return
    run.send("Design two screens")
    members = {n: a["role"] for n, a in run.agents().items() if n != LEADER}
    assert len(members) == 2, members
    assert sorted(members.values()) == ["ui-designer", "ui-operator"]
    for name in members:
        assert types(run.history(name)) == ["HumanMessage", "AIMessage"]


def test_two_creators_in_one_superstep_get_distinct_names_and_the_second_is_told(make_team, tmp_path):
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "coordinator.md").write_text(
        "---\nid: coordinator\nname: Coordinator\ndescription: Runs a sub-team.\n"
        "tools: [leader, member]\nlevel: L1\n---\nYou coordinate.\n"
    )
    run = make_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="coordinator", task="Build a sub-team.")),
                act(call("create_sub_agent", role_id="researcher", task="From the leader.")),
                *[""] * 6,
            ],
            "Coordinator_1": [
                act(call("create_sub_agent", role_id="researcher", task="From the coordinator.")),
                "Coordinated.",
                "",
            ],
            "*": ["Researched.", "Again."],
        },
        roles_dir=roles,
    )
    run.send("Go")
    assert list(run.agents()) == [LEADER, "Coordinator_1", "Researcher_1", "Researcher_2"]
    tasks = {name: run.inbox_texts(name)[0] for name in ("Researcher_1", "Researcher_2")}
    assert "From the leader." in tasks["Researcher_1"] and "Task from Team Leader" in tasks["Researcher_1"]
    assert "From the coordinator." in tasks["Researcher_2"] and "Task from Coordinator_1" in tasks["Researcher_2"]
    # The coordinator's tool said Researcher_1; it is told the real name.
    notices = [t for t in run.inbox_texts("Coordinator_1") if "Researcher_2" in t]
    assert len(notices) == 1 and "Researcher_1" in notices[0]


# --- inline vs new-turn delivery ----------------------------------------------------


def test_a_message_to_a_busy_member_lands_after_its_tool_results_before_its_next_model_call(run_team):
    seen: list[list] = []

    def second_step(messages):
        seen.append(list(messages))
        return act(call("list_files"))

    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design the page.")),
                act(call("send_message_to_sub_agent", display_name="UI Operator_1", message="Use blue.")),
                *reply_when_done("Page designed.", "UI Operator_1"),
            ],
            "UI Operator_1": [act(call("list_files")), second_step, "Designed it in blue."],
        }
    )
    # What the model saw at its second step: the tool result, then the message.
    assert len(seen) == 1
    assert isinstance(seen[0][-2], ToolMessage)
    assert isinstance(seen[0][-1], HumanMessage)
    assert parsed(seen[0][-1].content) == env("Message", LEADER, "Message", "Use blue.")
    history = run.history("UI Operator_1")
    assert types(history) == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    # Inline: the same turn went on, no new turn started.
    assert run.agents()["UI Operator_1"]["turn"] == 1
    assert run.user_replies() == ["Page designed."]


def test_a_message_to_an_idle_member_starts_a_new_turn(run_team):
    def after_idle(messages):
        assert isinstance(messages[-2], AIMessage) and messages[-2].content == "Header done."
        assert isinstance(messages[-1], HumanMessage)
        return "Footer done."

    def leader_second_turn(messages):
        assert has_envelope(str(messages[-1].content), title="Result", sender="UI Operator_1", id="out_1")
        return act(call("send_message_to_sub_agent", display_name="UI Operator_1", message="Now the footer."))

    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Do the header.")),
                "",
                leader_second_turn,
                "",
                "Header and footer done.",
            ],
            "UI Operator_1": ["Header done.", after_idle],
        }
    )
    history = run.history("UI Operator_1")
    assert types(history) == ["HumanMessage", "AIMessage", "HumanMessage", "AIMessage"]
    assert "Now the footer." in history[2].content
    record = run.agents()["UI Operator_1"]
    assert record["turn"] == 2
    assert record["status"] == "idle"
    assert env("Result", "UI Operator_1", "Output", "Footer done.", id="out_2") in envelopes_in(run, LEADER)
    assert run.user_replies() == ["Header and footer done."]


def test_a_message_to_a_member_with_an_open_tool_call_waits_for_its_result(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                "",
                act(
                    call("send_message_to_sub_agent", display_name="UI Operator_1", message="Also add a logo."),
                    call("answer_sub_agent_question", question_id="ask_1", answer="Blue."),
                ),
                *reply_when_done("Done.", "UI Operator_1"),
            ],
            "UI Operator_1": [act(call("ask_master", question="Colour?")), "Designed in blue, with a logo."],
        }
    )
    history = run.history("UI Operator_1")
    assert types(history) == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage", "AIMessage"]
    # The tool call and its result stay adjacent; the message comes after.
    assert history[2].tool_call_id == history[1].tool_calls[0]["id"]
    assert "Blue." in history[2].content
    assert "Also add a logo." in history[3].content


def test_messages_arriving_together_land_in_one_turn_in_order(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(
                    call("send_message_to_sub_agent", display_name="Researcher_1", message="First."),
                    call("send_message_to_sub_agent", display_name="Researcher_1", message="Second."),
                ),
                *reply_when_done("ok", "Researcher_1"),
            ],
            "Researcher_1": ["Got both."],
        }
    )
    assert [(e["sender"], e["body"]) for e in envelopes_in(run, "Researcher_1")] == [
        (LEADER, "First."),
        (LEADER, "Second."),
    ]
    assert run.agents()["Researcher_1"]["turn"] == 1


# --- parallel members ---------------------------------------------------------------


def test_every_runnable_member_steps_in_the_same_superstep(make_team):
    members = ["UI Operator_1", "UI Operator_2", "Researcher_1", "Code Reviewer_1"]
    run = make_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="ui-operator", task="B"),
                    call("create_sub_agent", role_id="researcher", task="C"),
                    call("create_sub_agent", role_id="code-reviewer", task="D"),
                ),
                *reply_when_done("All four done.", *members),
            ],
            **{name: busy(2, f"{name} done.") for name in members},
        }
    )
    steps = run.supersteps("Go, in parallel")
    for scheduled, ran in steps:
        assert Counter(ran) == Counter(scheduled)
    # After the leader's first step, the four members and the leader run together.
    assert steps[0] == ([LEADER], [LEADER])
    assert set(steps[1][0]) == {*members, LEADER}
    # The members' three steps each took one superstep, all together.
    member_steps = [set(ran) & set(members) for _, ran in steps]
    assert member_steps[1:4] == [set(members)] * 3
    assert not any(member_steps[4:])
    assert run.user_replies() == ["All four done."]


# One policy for the tests that need limits (each policy compiles a team once).
LIMITS = Policy(max_parallel=2, max_turn_steps=3)


def test_max_parallel_caps_the_members_stepping_in_one_superstep(make_team):
    max_parallel = LIMITS.max_parallel
    members = ["UI Operator_1", "UI Operator_2", "Researcher_1", "Code Reviewer_1"]
    run = make_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="ui-operator", task="B"),
                    call("create_sub_agent", role_id="researcher", task="C"),
                    call("create_sub_agent", role_id="code-reviewer", task="D"),
                ),
                *reply_when_done("All four done.", *members, turns=30),
            ],
            **{name: busy(2, f"{name} done.") for name in members},
        },
        policy=LIMITS,
    )
    steps = run.supersteps("Go")
    # The leader is not counted against the cap: it always gets its step.
    for scheduled, ran in steps:
        assert len([n for n in scheduled if n != LEADER]) <= max_parallel
        assert Counter(ran) == Counter(scheduled)
    assert max(len([n for n in ran if n != LEADER]) for _, ran in steps) == max_parallel
    # Nobody starves: every member finished its three steps.
    for name in members:
        assert run.agents()[name]["steps"] == 3
        assert run.status(name) == "idle"
    assert run.user_replies() == ["All four done."]


# --- nothing hangs -------------------------------------------------------------------


def test_two_members_asking_each_other_do_not_deadlock(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="researcher", task="B"),
                ),
                *reply_when_done("Both finished.", "UI Operator_1", "Researcher_1"),
            ],
            "UI Operator_1": [
                act(call("ask_other_agent", display_name="Researcher_1", question="Your data?")),
                "UI final.",
            ],
            "Researcher_1": [
                act(call("ask_other_agent", display_name="UI Operator_1", question="Your layout?")),
                "Research final.",
            ],
        }
    )
    results = [
        str(m.content) for name in ("UI Operator_1", "Researcher_1") for m in run.tool_results(name, "ask_other_agent")
    ]
    broken = [r for r in results if "deadlock" in r]
    assert len(broken) == 1
    assert "UI Operator_1" in broken[0] and "Researcher_1" in broken[0]
    assert all(r["status"] != "pending" for r in run.requests().values())
    assert all(a["status"] == "idle" and not a["waits"] for a in run.agents().values())
    assert run.user_replies() == ["Both finished."]


def test_a_question_the_leader_never_answers_is_reminded_then_released(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                "",
                "Thinking about it.",
                "",
                "",
                "",
                "",
            ],
            "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Designed in my own colour."],
        },
        policy=Policy(leader_reminders=1),  # the default
    )
    reminders = run.notices(LEADER, notices.REMINDER)
    assert len(reminders) == 1
    assert "ask_1" in reminders[0] and "answer_sub_agent_question" in reminders[0]
    released = run.tool_result("UI Operator_1", "ask_master")
    assert run.requests()["ask_1"]["status"] == "expired"
    assert released == run.requests()["ask_1"]["answer"]
    assert run.status("UI Operator_1") == "idle"
    assert run.history("UI Operator_1")[-1].content == "Designed in my own colour."


def _answer_the_question(messages):
    """Leader turn: answer the member's question if one is visible, else end the turn."""
    seen = "\n".join(str(m.content) for m in messages if not isinstance(m, AIMessage))
    ids = re.findall(r"Question from UI Operator_1\nid: (ask_\d+)\n", seen)
    answered = any(
        c["name"] == "answer_sub_agent_question" for m in messages if isinstance(m, AIMessage) for c in m.tool_calls
    )
    if ids and not answered:
        return act(call("answer_sub_agent_question", question_id=ids[-1], answer="Use blue."))
    return ""


@pytest.mark.parametrize(
    "leader_turns",
    [
        # The leader has seen the question but sleeps on the member instead of answering.
        ["", act(call("sleep", wait_sub_agent_output="UI Operator_1"))],
    ],
    ids=["sleep"],
)
def test_a_leader_blocked_on_a_member_that_waits_for_it_still_gets_to_answer(run_team, leader_turns):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design the page.")),
                *leader_turns,
                *[_answer_the_question] * 8,
            ],
            "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Designed in blue.", "Done."],
        }
    )
    answers = run.tool_results(LEADER, "answer_sub_agent_question")
    assert answers, "the leader never saw the question while it could still answer it"
    assert answers[0].status != "error", answers[0].content
    assert "Use blue." in run.tool_result("UI Operator_1", "ask_master")
    assert not any(a["waits"] for a in run.agents().values())


def test_a_member_that_asks_the_leader_while_the_leader_asks_it_answers_first(run_team):
    # NOTE: both waits are opened in the same superstep: the member's counts as the
    # newer one, so its question is cancelled; it then reads the leader's and replies.
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design the page.")),
                act(call("ask_sub_agent", display_name="UI Operator_1", question="ETA?")),
                *[_answer_the_question] * 8,
            ],
            "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Ready in an hour.", "Done."],
        }
    )
    assert run.tool_result("UI Operator_1", "ask_master").startswith("Error: deadlock:")
    assert run.tool_result(LEADER, "ask_sub_agent").endswith("Ready in an hour.")
    statuses = {r["kind"]: r["status"] for r in run.requests().values()}
    assert statuses == {"ask": "cancelled", "question": "answered"}
    assert not run.tool_results(LEADER, "answer_sub_agent_question")  # the cancelled question never reached it
    assert not any(a["waits"] for a in run.agents().values())


def test_ask_sub_agent_to_a_member_that_ends_without_text_does_not_hang(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher")),
                act(call("ask_sub_agent", display_name="Researcher_1", question="Status?")),
                "",
                "",
                "No answer.",
            ],
            "Researcher_1": [""],
        }
    )
    result = run.tool_result(LEADER, "ask_sub_agent")
    assert run.requests()["ask_1"]["status"] == "expired"
    assert result == run.requests()["ask_1"]["answer"] and "Researcher_1" in result
    assert not run.agents()[LEADER]["waits"]


def test_a_failing_member_is_marked_failed_and_the_team_goes_on(run_team):
    def provider_down(messages):
        raise RuntimeError("provider down")

    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="researcher", task="B"),
                ),
                *reply_when_done("Researcher done; UI failed.", "Researcher_1"),
            ],
            "UI Operator_1": [provider_down],
            "Researcher_1": busy(1, "Research done."),
        }
    )
    assert run.status("UI Operator_1") == "failed"
    failures = run.notices(LEADER, notices.FAILED)
    assert len(failures) == 1 and "UI Operator_1" in failures[0] and "provider down" in failures[0]
    assert run.status("Researcher_1") == "idle"
    assert run.user_replies() == ["Researcher done; UI failed."]


def test_a_member_looping_past_its_step_budget_is_stopped_and_the_leader_told(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="code-reviewer", task="Review.")), "", "Reviewer stopped."],
            "Code Reviewer_1": [act(call("list_files"))] * 10,
        },
        policy=LIMITS,
    )
    record = run.agents()["Code Reviewer_1"]
    assert record["status"] == "stopped"
    assert record["steps"] == 3
    assert any("Code Reviewer_1" in t and "stopped" in t for t in run.inbox_texts(LEADER))
    assert run.user_replies() == ["Reviewer stopped."]


def test_sleep_on_a_member_that_fails_wakes_the_leader(run_team):
    def provider_down(messages):
        raise RuntimeError("provider down")

    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="B")),
                act(call("sleep", wait_sub_agent_output="Researcher_1")),
                "Researcher failed.",
                "",
            ],
            "Researcher_1": [act(call("list_files")), provider_down],
        }
    )
    result = run.tool_result(LEADER, "sleep")
    assert "Researcher_1" in result and "failed" in result
    assert run.status("Researcher_1") == "failed"


# --- bounces ------------------------------------------------------------------------


def test_a_message_to_a_member_terminated_earlier_in_the_same_step_is_refused(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Research.")),
                act(
                    call("terminate_sub_agent", display_name="Researcher_1"),
                    call("send_message_to_sub_agent", display_name="Researcher_1", message="Late news."),
                ),
                "Done.",
                "",
            ],
            "Researcher_1": busy(3, "never"),
        }
    )
    # The sender learns at once, from the tool result, that nothing was sent.
    assert error_codes(run, LEADER, "send_message_to_sub_agent") == [errors.AGENT_ENDED]
    assert not any("Late news." in str(m.content) for m in run.history("Researcher_1"))


def test_unread_messages_of_a_terminated_member_are_bounced_and_its_question_cancelled(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                "",
                act(
                    call("send_message_to_sub_agent", display_name="UI Operator_1", message="Please hurry."),
                    call("terminate_sub_agent", display_name="UI Operator_1"),
                ),
                "Terminated it.",
                "",
            ],
            "UI Operator_1": [act(call("ask_master", question="Colour?")), "never"],
        }
    )
    history = run.history("UI Operator_1")
    assert not any("Please hurry." in str(m.content) for m in history)
    # Its open call was closed, so its history stays valid for a model.
    assert isinstance(history[-1], ToolMessage) and history[-1].tool_call_id == history[-2].tool_calls[0]["id"]
    assert run.requests()["ask_1"]["status"] == "cancelled"
    bounced = run.notices(LEADER, notices.BOUNCED)
    assert len(bounced) == 1 and "Please hurry." in bounced[0]
    assert [d["to"] for d in run.values["deliveries"].values() if d["status"] == "bounced"] == ["UI Operator_1"]


@pytest.mark.parametrize(
    "asking_call",
    [
        call("ask_sub_agent", display_name="Researcher_1", question="Status?"),
        call("sleep", wait_sub_agent_output="Researcher_1"),
    ],
    ids=["ask_sub_agent", "sleep"],
)
def test_waiting_on_a_member_terminated_in_the_same_step_answers_at_once(run_team, asking_call):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="researcher", task="Research.")),
                act(call("terminate_sub_agent", display_name="Researcher_1"), asking_call),
                "Done.",
                "",
            ],
            "Researcher_1": busy(3, "never"),
        }
    )
    result = run.tool_result(LEADER, asking_call["name"])
    assert "Researcher_1" in result and "terminated" in result, result
    assert "deadlock" not in result, result


def test_a_question_to_a_peer_terminated_in_the_same_superstep_is_answered_not_deadlocked(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="researcher", task="B"),
                ),
                act(call("terminate_sub_agent", display_name="Researcher_1")),
                *reply_when_done("Done.", "UI Operator_1"),
            ],
            "UI Operator_1": [
                act(call("ask_other_agent", display_name="Researcher_1", question="Your data?")),
                "UI done.",
            ],
            "Researcher_1": busy(3, "never"),
        }
    )
    result = run.tool_result("UI Operator_1", "ask_other_agent")
    assert "Researcher_1" in result and "terminated" in result, result
    assert "deadlock" not in result, result
    assert run.requests()["ask_1"]["status"] == "cancelled"


def test_a_question_from_a_member_terminated_in_the_same_superstep_is_cancelled(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                act(call("terminate_sub_agent", display_name="UI Operator_1")),
                *[""] * 6,
            ],
            "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Designed."],
        }
    )
    assert run.status("UI Operator_1") == "terminated"
    # Nothing waits for the leader: it is not reminded of a question nobody needs.
    assert run.notices(LEADER, notices.REMINDER) == []
    for request in run.requests().values():
        assert request["status"] == "cancelled", request
    # The member's history stays valid: its call is closed.
    history = run.history("UI Operator_1")
    assert isinstance(history[-1], ToolMessage)


# --- exactly once ----------------------------------------------------------------------


def assert_well_formed(history, name: str) -> None:
    """Every tool call is answered exactly once, right after its AI message; no duplicates."""
    answered = Counter(m.tool_call_id for m in history if isinstance(m, ToolMessage))
    assert all(n == 1 for n in answered.values()), (name, answered)
    for i, message in enumerate(history):
        if isinstance(message, AIMessage):
            ids = [c["id"] for c in message.tool_calls] + [c["id"] for c in message.invalid_tool_calls]
            block = history[i + 1 : i + 1 + len(ids)]
            assert sorted(m.tool_call_id for m in block if isinstance(m, ToolMessage)) == sorted(ids), (name, i)
    ai_ids = {c["id"] for m in history if isinstance(m, AIMessage) for c in m.tool_calls}
    ai_ids |= {c["id"] for m in history if isinstance(m, AIMessage) for c in m.invalid_tool_calls}
    assert set(answered) == ai_ids, name
    envelopes = Counter(str(m.content) for m in history if isinstance(m, HumanMessage))
    assert all(n == 1 for n in envelopes.values()), (name, envelopes.most_common(2))


def test_the_demo_team_delivers_every_message_exactly_once(make_team):
    from pathlib import Path

    import teamgraph

    demo = Path(teamgraph.__file__).parent / "demo" / "demo.yaml"
    if not demo.exists():
        pytest.skip("no demo script")
    import yaml

    run = make_team(yaml.safe_load(demo.read_text(encoding="utf-8")))
    run.send("Build a login feature")
    agents = run.agents()
    assert set(agents) == {LEADER, "UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1"}
    for name in agents:
        assert_well_formed(run.history(name), name)
    # Each output id reaches the leader at most once, and in order.
    leader_text = "\n".join(run.inbox_texts(LEADER))
    out_ids = re.findall(r"id: (out_\d+)", leader_text)
    assert len(out_ids) == len(set(out_ids))
    # Each question reaches its receiver exactly once.
    for request in run.requests().values():
        receiver_text = "\n".join(run.inbox_texts(request["to"]))
        assert receiver_text.count(f"id: {request['id']}\n") == 1, request["id"]
        assert request["status"] == "answered"
    # Every member's final answer reached the leader once (as a result or a tool result).
    for name in agents:
        if name == LEADER:
            continue
        final = run.history(name)[-1].content
        assert leader_text.count(final) == 1, name
    # The user sees the leader's report once.
    assert len(run.user_replies()) == 1


def test_histories_stay_exactly_once_across_user_messages(make_team):
    def leader(messages):
        last = str(messages[-1].content)
        if last == "Part one, please":
            return act(call("create_sub_agent", role_id="researcher", task="Part one."))
        if last == "Now part two":
            return act(call("send_message_to_sub_agent", display_name="Researcher_1", message="Part two."))
        if has_envelope(last, title="Result", sender="Researcher_1", id="out_1"):
            return "Part one done."
        if has_envelope(last, title="Result", sender="Researcher_1", id="out_2"):
            return "Part two done."
        return ""

    run = make_team(
        {
            LEADER: [leader] * 8,
            "Researcher_1": [act(call("write_file", path="one.md", content="1")), "One written.", "Two written."],
        }
    )
    run.send("Part one, please")
    before = {name: list(run.history(name)) for name in run.agents()}
    run.send("Now part two")
    for name, old in before.items():
        new = run.history(name)
        assert len(new) > len(old), name
        assert [(type(m), m.content) for m in new[: len(old)]] == [(type(m), m.content) for m in old], name
        assert_well_formed(new, name)
    assert run.user_replies() == ["Part one done.", "Part two done."]
    user_inputs = [t for t in run.inbox_texts(LEADER) if t in ("Part one, please", "Now part two")]
    assert user_inputs == ["Part one, please", "Now part two"]


# --- step slices ------------------------------------------------------------------------


def test_a_slice_runs_its_work_steps_one_task_each_and_messages_wait_for_its_end(tmp_path):
    from langchain_core.tools import tool

    from teamgraph import ScriptedChatModel, Team

    notes: list[str] = []

    @tool
    def take_note(text: str) -> str:
        """Keep a note (work that asks the router for nothing)."""
        notes.append(text)
        return "noted"

    # NOTE: a project file write records its version with the router (a file effect), which ends
    # a slice like any effect; this slice's work is a tool of the user's that asks for nothing.
    script = {
        LEADER: [
            act(call("create_sub_agent", role_id="researcher", task="Write three notes.")),
            act(call("send_message_to_sub_agent", display_name="Researcher_1", message="Also add a summary.")),
            *reply_when_done("Notes written.", "Researcher_1"),
        ],
        "Researcher_1": [
            act(call("take_note", text="a")),
            act(call("take_note", text="b")),
            act(call("take_note", text="c")),
            "Three notes written, with a summary.",
        ],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=Policy(slice_steps=3), tools=[take_note])
    graph = team.compile()
    config = {"configurable": {"thread_id": "slice"}}
    ran_together = []
    for update in graph.stream({"messages": [("user", "Go")]}, config, stream_mode="updates"):
        for node, value in update.items():
            step = (value or {}).get("histories", {}).get("Researcher_1", [])
            if node == "researcher" and any(isinstance(m, AIMessage) for m in step):
                ran_together.append(sum(isinstance(m, AIMessage) for m in step))
    # NOTE: one model call a task: a call made in the task would hold the superstep (and everybody).
    assert ran_together == [1, 1, 1, 1]
    history = team.history(config, "Researcher_1")
    # The leader's message arrived after the slice's last tool result, never inside it.
    message_at = next(i for i, m in enumerate(history) if "Also add a summary." in str(m.content))
    assert [type(m).__name__ for m in history[message_at - 2 : message_at]] == ["AIMessage", "ToolMessage"]
    assert sum(isinstance(m, AIMessage) for m in history[:message_at]) == 3
    assert notes == ["a", "b", "c"]
    # The message landed inline, so the fourth call (which ends the turn) saw it.
    assert isinstance(history[message_at + 1], AIMessage)
    assert team.agents(config)["Researcher_1"]["steps"] == 4


def test_a_slice_ends_at_a_step_that_asks_the_team_for_something(tmp_path):
    from teamgraph import ScriptedChatModel, Team

    script = {
        LEADER: [
            act(call("create_sub_agent", role_id="researcher", task="Research.")),
            "",
            act(call("answer_sub_agent_question", question_id="ask_1", answer="Both.")),
            *reply_when_done("Done.", "Researcher_1"),
        ],
        "Researcher_1": [
            act(call("write_file", path="a.md", content="a")),
            act(call("ask_master", question="One source or both?")),
            act(call("write_file", path="b.md", content="b")),
            "Used both sources.",
        ],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=Policy(slice_steps=5))
    graph = team.compile()
    config = {"configurable": {"thread_id": "slice-ask"}}
    out = graph.invoke({"messages": [("user", "Go")]}, config)
    assert out["messages"][-1].content == "Done."
    tool_results = [m.content for m in team.history(config, "Researcher_1") if isinstance(m, ToolMessage)]
    assert tool_results[1] == "Team Leader answered: Both."
