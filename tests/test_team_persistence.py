"""Scenario tests of persistence: resume in a new process, multi-turn threads,
custom roles after a restart, storage growth, and the metadata of model calls.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from fidelity_fixtures import has_envelope
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from pg_fixtures import postgres_server, postgres_url  # noqa: F401
from scripting import act, call

from teamgraph import ScriptedChatModel, Team

LEADER = "Team Leader"


# --- resume in a new process -------------------------------------------------------

# The team of the resume scenario, as a module both processes load. The leader
# decides from the last message it got, so its script does not depend on how
# messages were batched. Run as a script, it starts the thread and the process
# dies (os._exit) when the leader is about to answer the engineer's question.
TEAM_MODULE = textwrap.dedent(
    """
    import os, sys

    from langchain_core.messages import HumanMessage
    from teamgraph import Policy, ScriptedChatModel, Team

    CRASH = False


    def act(*calls):
        return {"content": "", "tool_calls": [{"name": n, "args": a} for n, a in calls]}


    def leader(messages):
        # NOTE: every envelope is a message of its own: read all that came since the last turn.
        new = []
        for message in reversed(messages):
            if not isinstance(message, HumanMessage):
                break
            new.insert(0, message.content)
        text = new[0] if len(new) == 1 else chr(10).join(new)
        if text == "Build the login feature":
            return act(
                ("create_sub_agent", {"role_id": "ui-operator", "task": "Design web/login.html."}),
                ("create_sub_agent", {"role_id": "full-stack-engineer", "task": "Build api/auth.py."}),
            )
        if "id: ask_1" in text:
            if CRASH:
                os._exit(17)  # the process dies in the middle of the run
            return act(("answer_sub_agent_question", {"question_id": "ask_1", "answer": "Use JWT."}))
        if text == "Add a logout button":
            return act(
                ("send_message_to_sub_agent", {"display_name": "UI Operator_1", "message": "Add a logout button."}),
                ("create_sub_agent", {"role_id": "ui-operator", "task": "Design web/signup.html."}),
            )
        if "id: ask_2" in text:
            return act(("answer_sub_agent_question", {"question_id": "ask_2", "answer": "Same palette."}))
        if "Result from" in text:
            return "Progress noted."
        return ""


    SCRIPT = {
        "Team Leader": [leader] * 30,
        "UI Operator_1": [
            act(("write_file", {"path": "web/login.html", "content": "<form>login</form>"})),
            "Login page done.",
            "Logout button added.",
        ],
        "Full-Stack Engineer_1": [
            act(("ask_master", {"question": "JWT or session cookies?"})),
            act(("write_file", {"path": "api/auth.py", "content": "# JWT auth"})),
            "Auth API done with JWT.",
        ],
        "UI Operator_2": [
            act(("ask_master", {"question": "Which palette?"})),
            "Sign-up page done.",
        ],
    }

    if __name__ == "__main__":
        CRASH = True
        team = Team(model=ScriptedChatModel(SCRIPT), home=sys.argv[1], policy=Policy())
        team.compile().invoke(
            {"messages": [("user", "Build the login feature")]},
            {"configurable": {"thread_id": "login"}},
        )
        sys.exit(0)  # not reached: the leader's step ends the process
    """
)


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"team_module_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _snapshot(run) -> dict:
    values = run.values
    return {
        "agents": {name: dict(rec) for name, rec in values.get("agents", {}).items()},
        "histories": {
            name: [(type(m).__name__, str(m.content), getattr(m, "tool_call_id", None)) for m in msgs]
            for name, msgs in values.get("histories", {}).items()
        },
        "requests": {rid: dict(r) for rid, r in values.get("requests", {}).items()},
    }


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, monkeypatch) -> str:
    """Where the team saves its threads: SQLite in its home, or a fresh database on a real PostgreSQL.

    ``Team()`` without a checkpointer uses ``$TEAMGRAPH_DB`` when set, so both this
    process and the ones it starts (which inherit the environment) use the database.
    """
    if request.param == "sqlite":
        monkeypatch.delenv("TEAMGRAPH_DB", raising=False)
        return "sqlite"
    monkeypatch.setenv("TEAMGRAPH_DB", request.getfixturevalue("postgres_url"))
    return "postgres"


@pytest.mark.slow
def test_a_new_process_resumes_a_crashed_run_and_continues_the_thread(make_team, tmp_path, database):
    module_path = tmp_path / "login_team.py"
    module_path.write_text(TEAM_MODULE, encoding="utf-8")
    home = tmp_path / "home"

    # Process 1 starts the thread and dies in the middle of it.
    first = subprocess.run([sys.executable, str(module_path), str(home)], capture_output=True, text=True, timeout=120)
    assert first.returncode == 17, first.stderr[-3000:]

    # Process 2 (this one) opens a new Team over the same home and thread.
    run = make_team(_load_module(module_path).SCRIPT, home=home, thread="login")
    assert isinstance(run.graph.checkpointer, PostgresSaver if database == "postgres" else SqliteSaver)
    assert (home / "teamgraph.sqlite").exists() == (database == "sqlite")
    before = _snapshot(run)

    # It finds every member, status and history. The process died in the leader's model
    # call, which the pass that delivered the question started before its checkpoint: the
    # engineer's step is saved (its ask_master call open), and the resumed run redoes that
    # pass from it (a crash loses only the calls in flight and the pass that started them).
    assert set(before["agents"]) == {LEADER, "UI Operator_1", "Full-Stack Engineer_1"}
    assert before["agents"]["Full-Stack Engineer_1"]["status"] == "running"
    assert "ask_1" not in before["requests"]
    engineer = before["histories"]["Full-Stack Engineer_1"]
    assert [m[0] for m in engineer] == ["HumanMessage", "AIMessage"]  # its ask_master call is open
    assert "Build api/auth.py." in engineer[0][1]
    assert "Design web/login.html." in before["histories"]["UI Operator_1"][0][1]

    # Resuming finishes the run process 1 left: the answer reaches the waiting engineer.
    run.graph.invoke(None, run.config)
    resumed = _snapshot(run)
    assert resumed["requests"]["ask_1"]["status"] == "answered"
    assert resumed["requests"]["ask_1"]["from"] == "Full-Stack Engineer_1"
    assert any(
        has_envelope(m[1], title="Question", sender="Full-Stack Engineer_1", id="ask_1")
        for m in resumed["histories"][LEADER]
    )
    engineer = resumed["histories"]["Full-Stack Engineer_1"]
    answer = next(m for m in engineer if m[0] == "ToolMessage")
    assert "Use JWT." in answer[1]
    assert engineer[-1] == ("AIMessage", "Auth API done with JWT.", None)
    assert all(rec["status"] == "idle" for rec in resumed["agents"].values())
    # The thread's files live in its own project folder, <home>/project/<thread id>/.
    assert (home / "project" / "login" / "web" / "login.html").read_text() == "<form>login</form>"
    assert (home / "project" / "login" / "api" / "auth.py").read_text() == "# JWT auth"

    # A second user message continues with the same members.
    run.send("Add a logout button")
    after = _snapshot(run)
    for name, old in before["histories"].items():
        assert resumed["histories"][name][: len(old)] == old, name
    for name, old in resumed["histories"].items():
        assert after["histories"][name][: len(old)] == old, name
    for name, history in after["histories"].items():  # nothing replayed twice by the resume
        tool_ids = [m[2] for m in history if m[0] == "ToolMessage"]
        envelopes = [m[1] for m in history if m[0] == "HumanMessage"]
        assert len(tool_ids) == len(set(tool_ids)), name
        assert len(envelopes) == len(set(envelopes)), name
    assert set(after["agents"]) == {LEADER, "UI Operator_1", "Full-Stack Engineer_1", "UI Operator_2"}
    ui = after["agents"]["UI Operator_1"]
    assert (ui["turn"], ui["status"]) == (2, "idle")
    assert after["histories"]["UI Operator_1"][-1] == ("AIMessage", "Logout button added.", None)
    assert after["histories"]["Full-Stack Engineer_1"] == resumed["histories"]["Full-Stack Engineer_1"]
    # Counters survived: the next question is ask_2, the next UI Operator is _2.
    assert after["requests"]["ask_2"]["from"] == "UI Operator_2"
    assert after["requests"]["ask_2"]["status"] == "answered"
    assert "Same palette." in after["requests"]["ask_2"]["answer"]
    leader_inputs = [
        m[1] for m in after["histories"][LEADER] if m[1] in ("Build the login feature", "Add a logout button")
    ]
    assert leader_inputs == ["Build the login feature", "Add a logout button"]


# --- multi-turn ------------------------------------------------------------------------


def test_a_second_user_message_continues_with_the_same_members(make_team):
    def leader(messages):
        last = str(messages[-1].content)
        if last == "Design the login page":
            return act(
                call("create_sub_agent", role_id="ui-operator", task="Design the login page."),
                call("create_sub_agent", role_id="researcher", task="Find login best practices."),
            )
        if last == "Now make it dark":
            return act(
                call("list_active_sub_agents"),
                call("send_message_to_sub_agent", display_name="UI Operator_1", message="Make it dark."),
            )
        seen = "\n\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))
        if has_envelope(seen, title="Result", sender="UI Operator_1", id="out_3") and last.startswith("Result"):
            return "The login page is dark now."
        if (
            "Result from UI Operator_1" in seen
            and "Result from Researcher_1" in seen
            and not any(isinstance(m, AIMessage) and m.content == "Login page designed." for m in messages)
        ):
            return "Login page designed."
        return ""

    run = make_team(
        {
            LEADER: [leader] * 12,
            "UI Operator_1": ["Light login page done.", "Dark login page done."],
            "Researcher_1": ["Use 2FA."],
        }
    )
    run.send("Design the login page")
    first = {name: (rec["turn"], len(run.history(name))) for name, rec in run.agents().items()}
    run.send("Now make it dark")

    assert list(run.agents()) == [LEADER, "UI Operator_1", "Researcher_1"]
    active = json.loads(run.tool_result(LEADER, "list_active_sub_agents"))
    assert [row["display_name"] for row in active] == ["UI Operator_1", "Researcher_1"]
    ui = run.history("UI Operator_1")
    assert [type(m).__name__ for m in ui] == ["HumanMessage", "AIMessage", "HumanMessage", "AIMessage"]
    assert ui[1].content == "Light login page done." and "Make it dark." in ui[2].content
    assert run.agents()["UI Operator_1"]["turn"] == first["UI Operator_1"][0] + 1
    # The researcher was not involved in the second turn and is unchanged.
    assert (run.agents()["Researcher_1"]["turn"], len(run.history("Researcher_1"))) == first["Researcher_1"]
    assert run.user_replies() == ["Login page designed.", "The login page is dark now."]


# --- custom roles after a restart -------------------------------------------------------


def _analyst_leader(messages):
    """The leader of the custom-role scenario: acts on the last message it got."""
    last = messages[-1]
    text = str(last.content)
    if text == "Analyse Q1":
        return act(
            call(
                "create_custom_agent",
                id="data-analyst",
                name="Data Analyst",
                description="Analyses tabular data.",
                prompt="You analyse CSV files.",
            )
        )
    if isinstance(last, ToolMessage) and text.startswith("Role 'data-analyst'"):
        return act(call("create_sub_agent", role_id="data-analyst", task="Analyse q1.csv."))
    if has_envelope(text, title="Result", sender="Data Analyst_1", id="out_1"):
        return "Q1 analysed."
    if text == "Analyse Q2":
        return act(
            call("list_agents"),
            call("send_message_to_sub_agent", display_name="Data Analyst_1", message="Now q2.csv."),
            call("create_sub_agent", role_id="data-analyst", task="Check q2.csv."),
        )
    since = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
    since = "\n".join(since[since.index("Analyse Q2") :]) if "Analyse Q2" in since else ""
    both = "Result from Data Analyst_1" in since and "Result from Data Analyst_2" in since
    if isinstance(last, HumanMessage) and both:
        return "Q2 done."
    return ""


ANALYST_SCRIPT = {
    LEADER: [_analyst_leader] * 12,
    "Data Analyst_1": ["Q1 revenue: 10k.", "Q2 revenue: 12k."],
    "Data Analyst_2": ["Q2 checked."],
}


def test_a_custom_role_is_usable_after_a_restart(make_team, team_home):
    first = make_team(ANALYST_SCRIPT)
    first.send("Analyse Q1")
    assert first.agents()["Data Analyst_1"]["role"] == "data-analyst"
    assert (team_home / "roles" / "data-analyst.md").is_file()
    assert first.user_replies() == ["Q1 analysed."]

    # A new Team over the same home: the role is loaded from its file.
    restarted = make_team(ANALYST_SCRIPT, home=team_home, thread=first.config["configurable"]["thread_id"])
    assert restarted.team is not first.team
    role = restarted.team.roles["data-analyst"]
    assert (role.name, role.prompt) == ("Data Analyst", "You analyse CSV files.")
    assert Path(role.source) == team_home / "roles" / "data-analyst.md"
    assert "data-analyst" in restarted.team.runtime.roles  # loaded from its file at start

    steps = restarted.supersteps("Analyse Q2")
    listed = json.loads(restarted.tool_result(LEADER, "list_agents"))
    assert "data-analyst" in {row["role_id"] for row in listed}
    assert restarted.agents()["Data Analyst_1"]["turn"] == 2
    assert restarted.history("Data Analyst_1")[-1].content == "Q2 revenue: 12k."
    assert restarted.agents()["Data Analyst_2"]["role"] == "data-analyst"
    assert restarted.history("Data Analyst_2")[-1].content == "Q2 checked."
    assert any({"Data Analyst_1", "Data Analyst_2"} <= set(ran) for _, ran in steps)
    assert restarted.user_replies() == ["Q1 analysed.", "Q2 done."]


# --- storage -------------------------------------------------------------------------------


def _question(i: int) -> str:
    return f"Question {i}: " + ("What does the data say about this part of the plan? " * 12)[:480]


def _answer(i: int) -> str:
    return f"Answer {i}: " + ("The data says the plan holds for this part, with caveats. " * 12)[:480]


def _interview(make_team, rounds: int) -> tuple[object, int]:
    leader = [act(call("create_sub_agent", role_id="researcher"))]
    leader += [act(call("ask_sub_agent", display_name="Researcher_1", question=_question(i))) for i in range(rounds)]
    leader += ["All questions answered."]
    run = make_team({LEADER: leader, "Researcher_1": [_answer(i) for i in range(rounds)]})
    return run


def _db_bytes(run) -> int:
    db = run.team.db_path
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def test_storage_grows_linearly_with_the_history(make_team):
    grown = {}
    chars = {}
    for rounds in (10, 40):
        run = _interview(make_team, rounds)
        start = _db_bytes(run)
        run.send("Interview the researcher")
        grown[rounds] = _db_bytes(run) - start
        assert run.user_replies() == ["All questions answered."]
        assert len(run.history("Researcher_1")) == 2 * rounds
        chars[rounds] = sum(len(str(m.content)) for name in run.agents() for m in run.history(name))
    assert 3.5 <= chars[40] / chars[10] <= 4.5  # the history really grew about 4x
    ratio = grown[40] / grown[10]
    assert ratio <= 5.0, f"4x history -> {ratio:.1f}x storage ({grown[10]} -> {grown[40]} bytes)"


# --- metadata of model calls -----------------------------------------------------------


class MetadataRecorder(BaseCallbackHandler):
    """Records the metadata of every chat model call (what tracing and the model see)."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    def on_chat_model_start(self, serialized, messages, *, metadata=None, **kwargs):
        self.seen.append(dict(metadata or {}))


def test_every_model_call_carries_the_agent_and_role_metadata(make_team):
    run = make_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="ui-operator", task="B"),
                    call("create_sub_agent", role_id="researcher", task="C"),
                ),
                "",
                "",
                "",
                "",
                "",
                "Done.",
            ],
            "UI Operator_1": [act(call("list_files")), "UI 1 done."],
            "UI Operator_2": ["UI 2 done."],
            "Researcher_1": [act(call("list_files")), act(call("list_files")), "Research done."],
        }
    )
    recorder = MetadataRecorder()
    run.send("Go", callbacks=[recorder])

    expected_roles = {
        LEADER: "team-leader",
        "UI Operator_1": "ui-operator",
        "UI Operator_2": "ui-operator",
        "Researcher_1": "researcher",
    }
    pairs = [(m.get("teamgraph_agent"), m.get("teamgraph_role")) for m in recorder.seen]
    assert all(agent in expected_roles and role == expected_roles[agent] for agent, role in pairs), pairs
    # One call per AI message in each history: every call was labelled, none twice.
    ai_counts = {name: sum(isinstance(m, AIMessage) for m in run.history(name)) for name in run.agents()}
    calls = {name: sum(1 for agent, _ in pairs if agent == name) for name in expected_roles}
    assert calls == ai_counts
    assert (calls["UI Operator_1"], calls["UI Operator_2"], calls["Researcher_1"]) == (2, 1, 3)


def _at_once(count: int, action: Callable[[], object], failures: list[BaseException]) -> None:
    """Run ``action`` in ``count`` threads released together; what they raise goes to ``failures``."""
    start = threading.Barrier(count)

    def run() -> None:
        start.wait()
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failures.append(exc)

    workers = [threading.Thread(target=run) for _ in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)


def test_teams_opening_one_fresh_home_at_the_same_moment_all_open_it(tmp_path):
    """Switching a file SQLite is creating to WAL is refused at once (no busy handler): it is retried."""
    from teamgraph.checkpoints.saver import connect

    failures: list[BaseException] = []
    # NOTE: the refusal needs a close race (1 fresh file in ~20 before the fix): 20 files.
    for trial in range(20):
        path = tmp_path / f"{trial}.sqlite"
        _at_once(8, lambda path=path: connect(path).close(), failures)
        assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert failures == []


def test_teams_compiled_on_a_new_home_at_once_set_its_stores_up_once(tmp_path):
    """Both get the home's memory and journal stores: the second setup waits for the first's migrations."""
    failures: list[BaseException] = []
    for attempt in range(8):
        home = tmp_path / f"home-{attempt}"
        _at_once(2, lambda home=home: Team(model=ScriptedChatModel({}), home=home).compile(), failures)
    assert failures == []
