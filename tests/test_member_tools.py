"""Scenario tests of the members' tools and the file tools, run through ``graph.invoke``.

Scenarios run as ``test_team_tools.py`` describes.
"""

import os
from pathlib import Path

from fidelity_fixtures import envelopes_in
from scripting import act, call, error_codes, reply_when_done

from teamgraph.tools import errors

LEADER = "Team Leader"

# --- member tools ---------------------------------------------------------------


def test_ask_other_agent_and_answer_other_agent_with_a_notice_to_the_leader(run_team):
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="Design the login page."),
                    call("create_sub_agent", role_id="ui-operator", task="Design the sign-up page."),
                ),
                *reply_when_done("Both pages done.", "UI Operator_1", "UI Operator_2"),
            ],
            "UI Operator_1": [
                act(call("list_files")),
                act(call("answer_other_agent", question_id="ask_1", answer="Indigo, 8px radius.")),
                "Login page done.",
            ],
            "UI Operator_2": [
                act(call("ask_other_agent", display_name="UI Operator_1", question="Which palette do you use?")),
                "Sign-up page done in indigo.",
            ],
        }
    )

    question = next(e for e in envelopes_in(run, "UI Operator_1") if e["tag"] == "Ask")
    assert (question["title"], question["sender"], question["fields"]["id"], question["body"]) == (
        "Question",
        "UI Operator_2",
        "ask_1",
        "Which palette do you use?",
    )
    assert "answer_other_agent" in question["fields"]["respond"]
    assert run.tool_result("UI Operator_1", "answer_other_agent") == "Answered ask_1 (UI Operator_2)."
    assert "Indigo, 8px radius." in run.tool_result("UI Operator_2", "ask_other_agent")
    request = run.requests()["ask_1"]
    assert (request["from"], request["to"], request["status"]) == ("UI Operator_2", "UI Operator_1", "answered")
    # The leader is told in one line, and only once.
    notices = [
        line
        for text in run.inbox_texts(LEADER)
        for line in text.split("\n")
        if "UI Operator_2 asked UI Operator_1" in line
    ]
    assert len(notices) == 1
    assert "ask_1" in notices[0] and "Which palette do you use?" in notices[0]
    assert run.user_replies() == ["Both pages done."]
    assert run.status("UI Operator_1") == run.status("UI Operator_2") == "idle"


def test_file_tools_work_inside_the_project_folder(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="ui-operator", task="Write the page.")), "", "ok"],
            "UI Operator_1": [
                act(call("write_file", path="site-a/web/login.html", content="<form>login</form>\n")),
                act(
                    call("read_file", path="site-a/web/login.html"),
                    call("list_files", path="site-a"),
                    call("list_files", path="site-a/web"),
                ),
                "Wrote site-a/web/login.html.",
            ],
        }
    )
    project = run.team.runtime.project_folder(run.config)
    assert project == run.team.home / "project" / run.config["configurable"]["thread_id"]
    assert (project / "site-a" / "web" / "login.html").read_text() == "<form>login</form>\n"
    assert "site-a/web/login.html" in run.tool_result("UI Operator_1", "write_file")
    assert run.tool_result("UI Operator_1", "read_file") == "<form>login</form>\n"
    site, web = (str(m.content) for m in run.tool_results("UI Operator_1", "list_files"))
    assert site.splitlines() == ["site-a/web/", "site-a/web/login.html"]
    assert web.splitlines() == ["site-a/web/login.html"]


OUTSIDE_CALLS = [
    call("write_file", path="../escaped.txt", content="x"),
    call("write_file", path="web/../../escaped.txt", content="x"),
    call("write_file", path="/tmp/teamgraph-escaped.txt", content="x"),
    call("read_file", path="../teamgraph.sqlite"),
    call("read_file", path="/etc/passwd"),
    call("list_files", path=".."),
    call("write_file", path="outside_link/escaped.txt", content="x"),
    call("read_file", path="outside_link/secret.txt"),
    call("list_files", path="outside_link"),
]


def test_file_tools_refuse_paths_outside_the_project_folder(make_team, tmp_path):
    run = make_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="ui-operator", task="Try it.")), "", "ok"],
            "UI Operator_1": [act(*OUTSIDE_CALLS), "Could not do it."],
        }
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    project = run.team.runtime.project_folder(run.config)
    if not (project / "outside_link").is_symlink():
        os.symlink(outside, project / "outside_link")
    try:
        run.send("Try to escape")
    finally:
        (project / "outside_link").unlink()

    results = run.tool_results("UI Operator_1")
    assert len(results) == len(OUTSIDE_CALLS)
    assert error_codes(run, "UI Operator_1") == [errors.FORBIDDEN] * len(OUTSIDE_CALLS)
    for tool_call, result in zip(OUTSIDE_CALLS, results, strict=True):
        text = str(result.content)
        assert "top secret" not in text and "root:x" not in text, (tool_call, text)
    assert not (run.team.home / "escaped.txt").exists()
    assert not (outside / "escaped.txt").exists()
    assert not Path("/tmp/teamgraph-escaped.txt").exists()
    # The member went on after the refusals.
    assert run.history("UI Operator_1")[-1].content == "Could not do it."


def test_read_file_of_a_missing_file_says_how_to_find_files(run_team):
    run = run_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="researcher", task="Read notes.")), "", "ok"],
            "Researcher_1": [act(call("read_file", path="notes.md")), "No notes."],
        }
    )
    assert error_codes(run, "Researcher_1", "read_file") == [errors.UNKNOWN_PATH]
    assert "list_files" in run.tool_result("Researcher_1", "read_file")  # NOTE: it names the tool that lists them
