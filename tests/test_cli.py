"""The `teamgraph` command: demo, run, resume, threads, history, roles; pauses.

Offline and deterministic: teams play scripted YAML files (``--model scripted:…``);
every command runs in a tmp folder (``--home`` or chdir). One test answers a pause
at a real pseudo-terminal with pexpect.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from teamgraph.cli import app

runner = CliRunner()

# A leader that needs its plan approved, a member whose ask_master goes to a person
# (--policy ask=human): the run pauses twice, on plan_1 and on ask_2.
PLAN_AND_ASK = {
    "Team Leader": [
        {
            "tool_calls": [
                {
                    "name": "propose_plan",
                    "args": {
                        "summary": "One engineer writes hello.py.",
                        "steps": [{"title": "Write hello.py", "role_id": "full-stack-engineer"}],
                        "complexity": "simple",
                    },
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "create_sub_agent",
                    "args": {"role_id": "full-stack-engineer", "task": "Write hello.py that greets the user."},
                }
            ]
        },
        "",
        "Done: hello.py greets the user.",
    ],
    "Full-Stack Engineer_1": [
        {"tool_calls": [{"name": "ask_master", "args": {"question": "Greet in English or French?"}}]},
        {"tool_calls": [{"name": "write_file", "args": {"path": "hello.py", "content": "print('bonjour')\n"}}]},
        "hello.py written.",
    ],
}

# No plan step (run with --no-plan): two members of one role, a file each.
TWO_WRITERS = {
    "Team Leader": [
        {
            "tool_calls": [
                {"name": "create_sub_agent", "args": {"role_id": "researcher", "task": "Write notes/a.md."}},
                {"name": "create_sub_agent", "args": {"role_id": "researcher", "task": "Write notes/b.md."}},
            ]
        },
        "",
        "Both notes are written: notes/a.md and notes/b.md.",
    ],
    "Researcher_1": [
        {"tool_calls": [{"name": "write_file", "args": {"path": "notes/a.md", "content": "# A\n"}}]},
        "notes/a.md written.",
    ],
    "Researcher_2": [
        {"tool_calls": [{"name": "write_file", "args": {"path": "notes/b.md", "content": "# B\n"}}]},
        "notes/b.md written.",
    ],
}


@pytest.fixture(autouse=True)
def plain_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model from the environment, and plain (non-terminal, wide) rich output."""
    for name in (
        "TEAMGRAPH_MODEL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "FORCE_COLOR",
        "TTY_COMPATIBLE",
        "TTY_INTERACTIVE",
        "COLUMNS",
        "TEAMGRAPH_DEBUG",
    ):
        monkeypatch.delenv(name, raising=False)


def script(tmp_path: Path, data: dict, name: str = "script.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return f"scripted:{path}"


def invoke(*args: str):
    return runner.invoke(app, list(args))


def assert_one_line_error(result, code: int) -> str:
    """The command failed with ``code`` and one ``Error: ...`` line, no traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("Error: ")
    return errors[0]


# --------------------------------------------------------------------------- demo


def test_demo_runs_the_scripted_team_and_says_who_did_what(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / ".teamgraph"  # the default home folder, in the current directory
    result = invoke("demo")
    assert result.exit_code == 0, result.output
    out = result.stdout

    # The leader created three members, two of one role.
    for member in ("UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1"):
        assert re.search(rf"^\s*{member}\s+(ui-operator|full-stack-engineer)\s+idle", out, re.M), member
    # A member asked the leader, who answered; a member asked a peer, who answered.
    assert re.search(r"ask_2\s+ask\s+Full-Stack Engineer_1 → Team Leader\s+answered", out)
    assert "Use JWT access tokens" in out
    assert re.search(r"ask_1\s+question\s+UI Operator_2 → UI Operator_1\s+answered", out)
    assert "Indigo #4F46E5" in out
    # The leader reported.
    assert "Team Leader's report" in out and "The login feature is built." in out
    # Files written, and where the SQLite file is.
    for rel in ("web/login.html", "web/signup.html", "api/auth.py"):
        assert (home / "project" / "demo-1" / rel).is_file()  # the thread's project folder
        assert rel in out
    match = re.search(r"^SQLite: (\S+)\s+\(thread (demo-\d+)\)", out, re.M)
    assert match, out
    assert match.group(1) == ".teamgraph/teamgraph.sqlite"
    assert (home / "teamgraph.sqlite").is_file()
    assert match.group(2) == "demo-1"

    # A second demo gets a fresh thread (the script would run out of turns on the old one).
    again = invoke("demo", "--home", str(home))
    assert again.exit_code == 0, again.output
    assert "(thread demo-2)" in again.stdout


# --------------------------------------------------------------------------- run


def test_run_with_a_scripted_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = invoke(
        "run",
        "Write two notes",
        "--model",
        script(tmp_path, TWO_WRITERS),
        "--home",
        str(home),
        "--no-plan",
        "--thread",
        "notes",
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Both notes are written" in out
    assert "Researcher_1" in out and "Researcher_2" in out
    assert (home / "project" / "notes" / "notes" / "a.md").read_text() == "# A\n"
    assert "(thread notes)" in out


def test_run_takes_the_model_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMGRAPH_MODEL", script(tmp_path, TWO_WRITERS))
    result = invoke("run", "Write two notes", "--home", str(tmp_path / "h"), "--no-plan")
    assert result.exit_code == 0, result.output
    assert "Both notes are written" in result.stdout
    assert "(thread run-1)" in result.stdout


def test_run_without_a_model_explains_how_to_configure_one(tmp_path: Path) -> None:
    result = invoke("run", "Build a login page", "--home", str(tmp_path / "h"))
    line = assert_one_line_error(result, 2)
    assert "TEAMGRAPH_MODEL" in line and "OPENAI_API_KEY" in line and "teamgraph demo" in line
    assert not (tmp_path / "h").exists()


def test_run_with_openai_but_no_key_fails_with_the_same_help(tmp_path: Path) -> None:
    result = invoke("run", "x", "--model", "openai:gpt-4o-mini", "--home", str(tmp_path / "h"))
    line = assert_one_line_error(result, 2)
    assert "OPENAI_API_KEY" in line


@pytest.mark.parametrize(
    ("model", "words"),
    [("nonsense", "Unknown model spec"), ("scripted:/nowhere/missing.yaml", "missing.yaml")],
)
def test_bad_model_specs_are_one_line_errors(tmp_path: Path, model: str, words: str) -> None:
    result = invoke("run", "x", "--model", model, "--home", str(tmp_path / "h"))
    assert words in assert_one_line_error(result, 2)


def test_a_script_that_runs_out_is_one_line_with_a_resume_hint(tmp_path: Path) -> None:
    short = {"Team Leader": [{"tool_calls": [{"name": "list_agents", "args": {}}]}]}
    result = invoke("run", "x", "--model", script(tmp_path, short), "--home", str(tmp_path / "h"), "--no-plan")
    line = assert_one_line_error(result, 1)
    assert "Team Leader" in line and "teamgraph resume run-1" in line


def test_bad_policy_setting_is_one_line(tmp_path: Path) -> None:
    result = invoke(
        "run",
        "x",
        "--model",
        script(tmp_path, TWO_WRITERS),
        "--home",
        str(tmp_path / "h"),
        "--policy",
        "no_such_field=1",
    )
    assert "no_such_field" in assert_one_line_error(result, 1)


# --------------------------------------------------------------------------- threads, history


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One demo thread (demo-1), shared by the read-only tests below."""
    home = tmp_path_factory.mktemp("demo") / "home"
    with pytest.MonkeyPatch.context() as mp:
        for name in ("TEAMGRAPH_MODEL", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS"):
            mp.delenv(name, raising=False)
        result = invoke("demo", "--home", str(home))
    assert result.exit_code == 0, result.output
    return home


def test_threads_lists_the_threads_in_the_home_folder(demo_home: Path, tmp_path: Path) -> None:
    result = invoke("threads", "--home", str(demo_home))
    assert result.exit_code == 0, result.output
    assert re.search(r"demo-1\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+4\s+done\s+Build a login feature", result.stdout)

    empty = invoke("threads", "--home", str(tmp_path / "empty"))
    assert empty.exit_code == 0
    assert "No threads yet" in empty.stdout
    assert not (tmp_path / "empty").exists()


def test_history_prints_every_agents_conversation(demo_home: Path) -> None:
    result = invoke("history", "demo-1", "--home", str(demo_home))
    assert result.exit_code == 0, result.output
    out = result.stdout
    for name in ("Team Leader", "UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1"):
        assert re.search(rf"^{name} · ", out, re.M), name
    assert "→ create_sub_agent(" in out
    assert "→ ask_master(" in out
    assert "[tool] ask_master" in out


def test_history_of_one_agent(demo_home: Path) -> None:
    result = invoke("history", "demo-1", "--agent", "UI Operator_2", "--home", str(demo_home))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert re.search(r"^UI Operator_2 · ui-operator · idle · \d+ messages", out, re.M)
    assert "Full-Stack Engineer_1 ·" not in out
    assert '→ ask_other_agent({"display_name": "UI Operator_1"' in out
    assert "Indigo #4F46E5 on white" in out  # the peer's answer, as the tool result


def test_history_unknown_agent_lists_the_agents(demo_home: Path) -> None:
    result = invoke("history", "demo-1", "--agent", "Nobody_1", "--home", str(demo_home))
    line = assert_one_line_error(result, 1)
    assert "Nobody_1" in line and "UI Operator_1" in line and "Full-Stack Engineer_1" in line


def test_history_unknown_thread_lists_the_threads(demo_home: Path) -> None:
    result = invoke("history", "nope", "--home", str(demo_home))
    line = assert_one_line_error(result, 1)
    assert "nope" in line and "demo-1" in line


# --------------------------------------------------------------------------- roles


def test_roles_lists_every_role(tmp_path: Path) -> None:
    result = invoke("roles", "--home", str(tmp_path / "h"))
    assert result.exit_code == 0, result.output
    for role_id in ("team-leader", "ui-operator", "full-stack-engineer", "researcher"):
        assert re.search(rf"^\s*{role_id}\s", result.stdout, re.M), role_id
    assert re.search(r"team-leader\s+Team Leader\s+L1\s+leader", result.stdout)


def test_roles_show_prints_the_role_file(tmp_path: Path) -> None:
    result = invoke("roles", "show", "ui-operator")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("---\nid: ui-operator\nname: UI Operator\n")
    assert "You are the team's UI" in result.stdout


def test_roles_with_a_roles_dir(tmp_path: Path) -> None:
    roles_dir = tmp_path / "roles"
    roles_dir.mkdir()
    text = "---\nid: data-analyst\nname: Data Analyst\ndescription: Analyses data.\n---\n\nYou analyse data.\n"
    (roles_dir / "data-analyst.md").write_text(text)
    listing = invoke("roles", "--roles-dir", str(roles_dir), "--home", str(tmp_path / "h"))
    assert listing.exit_code == 0, listing.output
    assert re.search(r"data-analyst\s+Data Analyst\s+L4", listing.stdout)
    shown = invoke("roles", "show", "data-analyst", "--roles-dir", str(roles_dir))
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == text.rstrip("\n") + "\n"


def test_roles_show_unknown_id_lists_the_ids(tmp_path: Path) -> None:
    result = invoke("roles", "show", "wizard", "--home", str(tmp_path / "h"))
    line = assert_one_line_error(result, 1)
    assert "wizard" in line and "ui-operator" in line and "team-leader" in line


def test_a_broken_role_file_is_one_line(tmp_path: Path) -> None:
    roles_dir = tmp_path / "roles"
    roles_dir.mkdir()
    (roles_dir / "bad.md").write_text("---\nid: bad\nname: Bad\nthinking_mode: slow\n---\nx\n")
    result = invoke("roles", "--roles-dir", str(roles_dir))
    line = assert_one_line_error(result, 1)
    assert "bad.md" in line and "thinking_mode" in line


# --------------------------------------------------------------------------- pauses


def test_answer_values_by_request_type() -> None:
    from teamgraph.cli import CLIError, parse_answer

    plan = {"type": "plan", "from": "Team Leader"}
    assert parse_answer("plan_1", plan, "yes") == {"approve": True, "feedback": ""}
    assert parse_answer("plan_1", plan, "reject: smaller steps") == {"approve": False, "feedback": "smaller steps"}
    with pytest.raises(CLIError, match="plan_1=yes or plan_1=no"):
        parse_answer("plan_1", plan, "Use blue")
    question = {"type": "ask", "from": "UI Operator_1", "question": "Which blue?"}
    assert parse_answer("ask_2", question, "no: navy, not sky") == "no: navy, not sky"
    decided = {  # leader_then_human: keep the leader's answer, or give your own
        **question,
        "leader_decision": {"answer": "Navy."},
        "expects": '{"approve": true} to keep the leader\'s answer, or a string',
    }
    assert parse_answer("ask_2", decided, "yes") == {"approve": True, "feedback": ""}
    assert parse_answer("ask_2", decided, "Sky blue.") == "Sky blue."


def test_a_pause_without_a_terminal_fails_clearly_then_resume_answers_it(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    model = script(tmp_path, PLAN_AND_ASK)
    result = invoke("run", "Write a greeting script", "--model", model, "--home", home, "--policy", "ask=human")
    line = assert_one_line_error(result, 3)
    assert "plan_1" in line and f"teamgraph resume run-1 --home {home} --answer plan_1=yes" in line

    bad = invoke("resume", "run-1", "--home", home, "--answer", "plan_1=perhaps")
    assert "plan_1=yes or plan_1=no" in assert_one_line_error(bad, 1)

    # The model and the policy are remembered for the thread: no --model, no --policy.
    second = invoke("resume", "run-1", "--home", home, "--answer", "plan_1=yes:keep it short")
    line = assert_one_line_error(second, 3)
    assert "plan_1 approved" in second.stdout
    assert "ask_2 (ask from Full-Stack Engineer_1: 'Greet in English or French?')" in line
    assert '--answer ask_2="..."' in line

    third = invoke("resume", "run-1", "--home", home, "--answer", "ask_2=French")
    assert third.exit_code == 0, third.output
    assert "Done: hello.py greets the user." in third.stdout
    assert re.search(
        r"ask_2\s+ask\s+Full-Stack Engineer_1 → you\s+answered\s+"
        r"Greet in English or French\? · The user answered: French",
        third.stdout,
    )

    done = invoke("resume", "run-1", "--home", home)
    assert done.exit_code == 0, done.output
    assert "nothing to resume" in done.stdout


def test_answers_given_up_front(tmp_path: Path) -> None:
    result = invoke(
        "run",
        "Write a greeting script",
        "--model",
        script(tmp_path, PLAN_AND_ASK),
        "--home",
        str(tmp_path / "h"),
        "--policy",
        "ask=human",
        "--answer",
        "plan_1=approve",
        "--answer",
        "ask_2=English",
    )
    assert result.exit_code == 0, result.output
    assert "Done: hello.py greets the user." in result.stdout
    assert re.search(r"plan_1\s+plan\s+Team Leader → you\s+approved", result.stdout)
    assert "The user answered: English" in result.stdout


def test_a_rejected_plan_goes_back_to_the_leader(tmp_path: Path) -> None:
    data = {
        "Team Leader": [
            PLAN_AND_ASK["Team Leader"][0],
            "Understood: no plan, nothing to do.",
        ]
    }
    result = invoke(
        "run",
        "x",
        "--model",
        script(tmp_path, data),
        "--home",
        str(tmp_path / "h"),
        "--answer",
        "plan_1=no:too big",
    )
    assert result.exit_code == 0, result.output
    assert re.search(r"plan_1\s+plan\s+Team Leader → you\s+rejected", result.stdout)
    assert "too big" in result.stdout  # the feedback, as the request's answer
    assert "Understood: no plan, nothing to do." in result.stdout


@pytest.mark.slow
def test_a_pause_answered_at_a_real_terminal(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    model = script(tmp_path, PLAN_AND_ASK)
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in ("TEAMGRAPH_MODEL", "FORCE_COLOR", "NO_COLOR", "COLUMNS", "LINES")
    }
    env["TERM"] = "xterm"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "teamgraph.cli", "run", "Write a greeting script", "--model", model, "--policy", "ask=human"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(50, 160),
    )
    try:
        child.expect(r"plan_1 · plan from Team Leader")
        child.expect(r"Approve plan_1\?")
        child.sendline("y")
        child.expect(r"Feedback \(optional\)")
        child.sendline("")
        child.expect(r"ask_2 · ask from Full-Stack Engineer_1")
        child.expect(r"Greet in English or French\?")
        child.expect(r"Answer ask_2")
        child.sendline("French, please")
        child.expect(r"Done: hello\.py greets the user\.")
        child.expect(r"The user answered: French, please")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    # In the thread's own project folder, <home>/project/<thread id>/.
    assert [p.parent.name for p in (tmp_path / ".teamgraph" / "project").glob("*/hello.py")] == ["run-1"]


def test_a_home_that_is_not_a_folder_or_a_corrupt_database_is_named(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "home.txt"
    not_a_folder.write_text("x")
    for command in (("threads",), ("history", "run-1")):
        line = assert_one_line_error(invoke(*command, "--home", str(not_a_folder)), 1)
        assert "home.txt" in line and "not a folder" in line
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "teamgraph.sqlite").write_text("this is no database")
    for command in (("threads",), ("history", "run-1")):
        line = assert_one_line_error(invoke(*command, "--home", str(corrupt)), 1)
        assert "teamgraph.sqlite" in line and "not a teamgraph database" in line


def test_an_answer_for_an_unknown_id_names_it_and_no_older_refusal(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    model = script(tmp_path, PLAN_AND_ASK)
    invoke("run", "Write a greeting script", "--model", model, "--home", home, "--policy", "ask=human")
    invoke("resume", "run-1", "--home", home, "--answer", "plan_1=perhaps")  # refused: stays in the state
    line = assert_one_line_error(invoke("resume", "run-1", "--home", home, "--answer", "ask_99=x"), 3)
    assert line.startswith("Error: --answer ask_99: no pending request has that id.")
    assert "plan_1" in line and "refused" not in line
