"""Scenario tests of the router: naming, delivery, parallel steps.

Nothing hanging and bounces are in ``test_no_hangs.py``; exactly-once histories and step
slices in ``test_routing_histories.py``.

Everything runs through ``graph.invoke`` / ``graph.stream`` with ScriptedChatModel
scripts (an agent's turn index is the number of AI messages in its history).
"""

from __future__ import annotations

import re
from collections import Counter

from fidelity_fixtures import env, envelopes_in, has_envelope, parsed
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from scripting import act, call, reply_when_done, types

from teamgraph import Policy, RoleFileError

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
