"""What an agent sees when it calls a tool badly, and what a bad role file says; through ``graph.invoke``.

Scenarios run as ``test_team_tools.py`` describes.
"""

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from scripting import act, call, error_codes, errors_of, reply_when_done
from test_team_tools import BUILTIN_MEMBER_ROLES

from teamgraph import RoleFileError, ScriptedChatModel, Team
from teamgraph.messaging.results import error_of
from teamgraph.tools import errors

LEADER = "Team Leader"


# --- bad input --------------------------------------------------------------------


def test_unknown_role_is_an_error_that_lists_the_roles(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="wizard", task="Cast a spell.")),
                act(call("create_sub_agent", role_id="team-leader")),
                "No such role.",
            ]
        }
    )
    assert error_codes(run, LEADER, "create_sub_agent") == [errors.UNKNOWN_ROLE] * 2
    wizard = run.tool_result(LEADER, "create_sub_agent")
    listed = wizard.split("Available roles:")[1]
    assert all(role in listed for role in BUILTIN_MEMBER_ROLES)
    assert "team-leader" not in listed
    assert set(run.agents()) == {LEADER}
    assert run.user_replies() == ["No such role."]


@pytest.mark.parametrize(
    "tool_call",
    [
        call("send_message_to_sub_agent", display_name="UI Operator_7", message="hi"),
        call("ask_sub_agent", display_name="UI Operator_7", question="?"),
        call("terminate_sub_agent", display_name="UI Operator_7"),
        call("stop_sub_agent", display_name="UI Operator_7"),
        call("sleep", wait_sub_agent_output="UI Operator_7"),
        call("get_sub_agent_status", display_names=["UI Operator_7"]),
    ],
    ids=lambda c: c["name"],
)
def test_unknown_member_is_an_error_that_lists_the_members(run_team, tool_call):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator"), call("create_sub_agent", role_id="researcher")),
                act(tool_call),
                "Checked.",
            ]
        }
    )
    assert error_codes(run, LEADER, tool_call["name"]) == [errors.UNKNOWN_AGENT]
    result = run.tool_result(LEADER, tool_call["name"])
    assert "UI Operator_7" in result  # NOTE: it names what was wrong
    assert "UI Operator_1" in result and "Researcher_1" in result  # NOTE: it lists the members by name
    assert run.user_replies() == ["Checked."]


def test_addressing_yourself_is_an_error(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="researcher", task="Research."),
                    call("send_message_to_sub_agent", display_name=LEADER, message="note to self"),
                    call("ask_sub_agent", display_name=LEADER, question="?"),
                ),
                "",
                "ok",
            ],
            "Researcher_1": [
                act(call("ask_other_agent", display_name="Researcher_1", question="Am I right?")),
                act(call("ask_other_agent", display_name=LEADER, question="Am I right?")),
                "Researched.",
            ],
        }
    )
    for tool in ("send_message_to_sub_agent", "ask_sub_agent"):
        assert error_codes(run, LEADER, tool) == [errors.SELF_ADDRESS]
    assert error_codes(run, "Researcher_1", "ask_other_agent") == [errors.SELF_ADDRESS, errors.NOT_A_MEMBER]
    assert run.requests() == {}
    assert run.status("Researcher_1") == "idle"


def test_answering_an_unknown_or_answered_question_is_an_error(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="Design."),
                    call("create_sub_agent", role_id="researcher", task="Research."),
                ),
                "",
                act(call("answer_sub_agent_question", question_id="ask_1", answer="Blue.")),
                act(
                    call("answer_sub_agent_question", question_id="ask_1", answer="Red."),
                    call("answer_sub_agent_question", question_id="ask_99", answer="?"),
                ),
                *reply_when_done("Done.", "UI Operator_1", "Researcher_1"),
            ],
            "UI Operator_1": [
                act(call("ask_master", question="Colour?")),
                act(call("answer_other_agent", question_id="ask_1", answer="mine")),
                "Designed in blue.",
            ],
            "Researcher_1": [
                act(call("answer_other_agent", question_id="ask_42", answer="x")),
                "Researched.",
            ],
        }
    )
    assert error_codes(run, LEADER, "answer_sub_agent_question") == [errors.ALREADY_ANSWERED, errors.UNKNOWN_REQUEST]
    # The first answer stands.
    assert "Blue." in run.tool_result("UI Operator_1", "ask_master")
    assert "Red." not in run.tool_result("UI Operator_1", "ask_master")
    assert "Blue." in run.requests()["ask_1"]["answer"]
    # A member cannot answer a question addressed to the leader, nor an unknown one.
    for member in ("UI Operator_1", "Researcher_1"):
        assert error_codes(run, member, "answer_other_agent") == [errors.UNKNOWN_REQUEST]
    assert run.user_replies() == ["Done."]


def test_unknown_question_error_does_not_list_a_question_answered_in_the_same_step(run_team):
    run = run_team(
        {
            LEADER: [
                act(call("create_sub_agent", role_id="ui-operator", task="Design.")),
                "",
                act(
                    call("answer_sub_agent_question", question_id="ask_1", answer="Blue."),
                    call("answer_sub_agent_question", question_id="ask_9", answer="?"),
                ),
                "",
                "Done.",
            ],
            "UI Operator_1": [act(call("ask_master", question="Colour?")), "Designed."],
        }
    )
    assert error_codes(run, LEADER, "answer_sub_agent_question") == [errors.UNKNOWN_REQUEST]
    unknown = run.tool_result(LEADER, "answer_sub_agent_question", 1)
    waiting = unknown.split("Questions waiting for your answer:")[1]
    assert "ask_1" not in waiting, unknown


@pytest.mark.parametrize(
    "tool_call, problem",
    [
        (call("create_sub_agent"), "role_id"),
        (call("create_sub_agent", role_id=["ui-operator"]), "role_id"),
        (call("send_message_to_sub_agent", display_name="UI Operator_1"), "message"),
        (call("get_sub_agent_status", display_names=7), "display_names"),
        (call("answer_sub_agent_question", question_id="ask_1", answer={"text": "Blue"}), "answer"),
        (call("create_custom_agent", id="x", name="X"), "description"),
    ],
    ids=lambda v: v["name"] + ":" + ",".join(v["args"]) if isinstance(v, dict) else "",
)
def test_missing_or_ill_typed_arguments_are_an_error_result_and_the_agent_goes_on(run_team, tool_call, problem):
    run = run_team({LEADER: [act(tool_call), "Recovered."]})
    assert error_codes(run, LEADER, tool_call["name"]) == [errors.INVALID_CALL]
    assert problem in run.tool_result(LEADER, tool_call["name"])  # NOTE: it names the argument to fix
    assert run.user_replies() == ["Recovered."]


def test_member_tool_call_with_missing_arguments_is_an_error_and_the_member_goes_on(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="researcher", task="Write notes.")), "", "ok"],
            "Researcher_1": [
                act(call("write_file", path="notes.md"), call("ask_master")),
                act(call("write_file", path="notes.md", content="notes")),
                "Notes written.",
            ],
        }
    )
    assert error_codes(run, "Researcher_1") == [errors.INVALID_CALL] * 2
    missing = errors_of(run, "Researcher_1")
    assert "content" in missing[0] and "question" in missing[1]
    assert run.requests() == {}
    assert run.history("Researcher_1")[-1].content == "Notes written."
    assert run.status("Researcher_1") == "idle"


def test_malformed_json_tool_arguments_are_an_error_tool_message_and_the_agent_goes_on(run_team):
    run = run_team(
        {
            LEADER: [
                {
                    "content": "Creating the team.",
                    "tool_calls": [
                        {"name": "create_sub_agent", "args": "not json"},
                        {"name": "create_sub_agent", "args": {"role_id": "researcher"}},
                    ],
                },
                act(call("create_sub_agent", role_id="ui-operator")),
                "Team ready.",
            ],
        }
    )
    leader = run.history(LEADER)
    first = next(m for m in leader if isinstance(m, AIMessage) and m.invalid_tool_calls)
    bad_id = first.invalid_tool_calls[0]["id"]
    answers = [m for m in leader if isinstance(m, ToolMessage) and m.tool_call_id == bad_id]
    assert len(answers) == 1
    assert (answers[0].status, error_of(answers[0])) == ("error", errors.INVALID_CALL)
    # The valid call of the same message ran, and the leader went on.
    assert set(run.agents()) == {LEADER, "Researcher_1", "UI Operator_1"}
    assert run.user_replies() == ["Team ready."]


def test_calling_a_tool_the_agent_does_not_have_lists_its_tools(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="researcher", task="Go.")), "", "ok"],
            "Researcher_1": [act(call("create_sub_agent", role_id="researcher")), "Cannot create members."],
        }
    )
    assert error_codes(run, "Researcher_1") == [errors.UNKNOWN_TOOL]
    [error] = errors_of(run, "Researcher_1")
    assert "ask_master" in error and "read_file" in error  # NOTE: it lists the agent's tools
    assert set(run.agents()) == {LEADER, "Researcher_1"}


# --- role files -------------------------------------------------------------------


def _role_file(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_role_file_errors_surface_through_team_roles_dir(tmp_path, team_home):
    roles = tmp_path / "roles"
    bad = _role_file(
        roles,
        "analyst.md",
        "---\nid: analyst\nname: Analyst\ndescription: Analyses.\nthinking_mode: slow\n---\nYou analyse.\n",
    )
    with pytest.raises(RoleFileError) as info:
        Team(model="scripted:unused.yaml", roles_dir=roles, home=team_home)
    message = str(info.value)
    assert str(bad) in message
    assert "thinking_mode" in message and "'slow'" in message
    assert "Fix:" in message and "fast or deep" in message


@pytest.mark.parametrize(
    "text, field, words",
    [
        ("id: analyst\nname: Analyst\n", None, ["front matter"]),
        ("---\nid: analyst\nname: Analyst\ntols: [files]\n---\nx\n", "tols", ["tools"]),
        ("---\nname: Analyst\n---\nx\n", "id", ["missing"]),
        ("---\nid: analyst\nname: Analyst\ntools: [files, magic]\n---\nx\n", "tools", ["magic"]),
        ("---\nid: analyst\nname: Analyst_2\n---\nx\n", "name", ["_<number>"]),
    ],
)
def test_role_file_mistakes_name_the_file_the_field_and_the_fix(tmp_path, team_home, text, field, words):
    path = _role_file(tmp_path / "roles", "analyst.md", text)
    with pytest.raises(RoleFileError) as info:
        Team(model="scripted:unused.yaml", roles_dir=tmp_path / "roles", home=team_home)
    assert info.value.path == str(path)
    assert info.value.field == field
    assert info.value.fix
    for word in words:
        assert word in str(info.value)


def test_roles_dir_that_is_a_file_and_duplicate_ids_are_errors(tmp_path, team_home):
    a_file = _role_file(tmp_path, "not-a-folder.md", "---\nid: a\nname: A\n---\n")
    with pytest.raises(RoleFileError, match="not a folder"):
        Team(model="scripted:unused.yaml", roles_dir=a_file, home=team_home)
    roles = tmp_path / "roles"
    _role_file(roles, "one.md", "---\nid: analyst\nname: Analyst\n---\n")
    _role_file(roles, "two.md", "---\nid: analyst\nname: Other Analyst\n---\n")
    with pytest.raises(RoleFileError) as info:
        Team(model="scripted:unused.yaml", roles_dir=roles, home=team_home)
    assert "two.md" in str(info.value) and "one.md" in str(info.value)


def test_a_broken_role_file_in_the_home_folder_is_reported_but_never_stops_the_team(team_home):
    # NOTE: the home's roles/ folder is the team's own (create_custom_agent writes it):
    # a broken file there is skipped with a warning, the team still compiles.
    _role_file(team_home / "roles", "broken.md", "---\nid: broken\nname: [Broken\n---\n")
    with pytest.warns(RuntimeWarning, match="broken.md"):
        team = Team(model=ScriptedChatModel({}), home=team_home)
    team.compile()
    (problem,) = team.runtime.role_problems.values()
    assert isinstance(problem, RoleFileError) and "line" in str(problem)
    assert "broken" not in team.roles


def test_roles_dir_roles_are_usable_and_override_builtins(run_team, tmp_path):
    roles = tmp_path / "roles"
    _role_file(
        roles,
        "analyst.md",
        "---\nid: analyst\nname: Analyst\ndescription: Analyses data.\n---\nYou are the analyst prompt.\n",
    )
    _role_file(
        roles,
        "researcher.md",
        "---\nid: researcher\nname: Scout\ndescription: Our own researcher.\n---\nYou scout.\n",
    )
    system_prompts: dict[str, str] = {}

    def capture(name):
        def turn(messages):
            assert isinstance(messages[0], SystemMessage)
            system_prompts[name] = str(messages[0].content)
            return f"{name} done."

        return turn

    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="analyst", task="Analyse."),
                    call("create_sub_agent", role_id="researcher", task="Scout."),
                ),
                *reply_when_done("ok", "Analyst_1", "Scout_1"),
            ],
            "Analyst_1": [capture("Analyst_1")],
            "Scout_1": [capture("Scout_1")],
        },
        roles_dir=roles,
    )
    assert set(run.agents()) == {LEADER, "Analyst_1", "Scout_1"}
    assert "You are the analyst prompt." in system_prompts["Analyst_1"]
    assert "You scout." in system_prompts["Scout_1"]
    assert isinstance(run.history("Analyst_1")[0], HumanMessage)


def test_your_own_tools_reach_the_roles_you_name_and_unknown_roles_are_refused(tmp_path):
    from langchain_core.tools import tool

    from teamgraph import ScriptedChatModel

    @tool
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    with pytest.raises(ValueError, match=r"unknown role\(s\) designer.*'\*' for every member"):
        Team(model=ScriptedChatModel({}), home=tmp_path / "bad", tools={"designer": [shout]})
    assert not (tmp_path / "bad").exists()

    script = {
        LEADER: [
            act(call("create_sub_agent", role_id="researcher", task="Shout.")),
            "",
            "Done.",
        ],
        "Researcher_1": [act(call("shout", text="hi")), "Shouted."],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path / "ok", tools={"researcher": [shout]})
    config = {"configurable": {"thread_id": "own-tools"}}
    team.compile().invoke({"messages": [("user", "Go")]}, config)
    results = [m.content for m in team.history(config, "Researcher_1") if isinstance(m, ToolMessage)]
    assert results == ["HI"]
