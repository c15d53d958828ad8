"""PostgreSQL as the team's database: the same scenarios as SQLite, on a real server.

The server comes from ``pg_fixtures`` (``$TEAMGRAPH_TEST_PG``, or a throwaway
cluster); every test gets a fresh database. The persistence scenario itself is
parametrized over both databases in test_team_persistence.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pg_fixtures import postgres_server, postgres_url  # noqa: F401
from test_delivery import (
    test_each_message_is_delivered_exactly_once_after_a_resume_in_a_new_process as exactly_once_scenario,
)
from typer.testing import CliRunner

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints import close_checkpointer, describe_db, open_checkpointer, thread_ids
from teamgraph.cli import app

pytestmark = pytest.mark.slow

runner = CliRunner()


@pytest.fixture
def on_postgres(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: F811
    """``$TEAMGRAPH_DB`` set to a fresh database: every Team here and in child processes uses it."""
    monkeypatch.setenv("TEAMGRAPH_DB", postgres_url)
    return postgres_url


@pytest.mark.parametrize("mode", ["crash", "pause"])
def test_each_message_is_delivered_exactly_once_after_a_new_process_resumes(on_postgres, tmp_path, mode):
    # The SQLite scenario of test_collaboration.py, unchanged, with the team's threads in PostgreSQL:
    # process 1 crashes (or pauses for a person), process 2 resumes; every message arrives once.
    exactly_once_scenario(tmp_path, mode)
    assert not (tmp_path / "home" / "teamgraph.sqlite").exists()
    saver = open_checkpointer(on_postgres, home=tmp_path)
    try:
        assert thread_ids(saver) == ["facts"]
    finally:
        close_checkpointer(saver)


def test_team_takes_a_database_url(postgres_url, tmp_path):  # noqa: F811
    script = {"Team Leader": ["Hello from PostgreSQL."]}
    team = Team(model=ScriptedChatModel(script), home=tmp_path, checkpointer=postgres_url)
    config = {"configurable": {"thread_id": "t1"}}
    team.compile().invoke({"messages": [("user", "Hi")]}, config)

    # A second team (another process would do the same) reads the thread back.
    again = Team(model=ScriptedChatModel({}), home=tmp_path / "elsewhere", checkpointer=postgres_url)
    assert [m.content for m in again.history(config, "Team Leader")][-1] == "Hello from PostgreSQL."
    assert not (tmp_path / "teamgraph.sqlite").exists()


def test_the_cli_runs_lists_reads_and_resumes_threads_in_postgres(postgres_url, tmp_path):  # noqa: F811
    home = str(tmp_path / "home")
    demo = runner.invoke(app, ["--db", postgres_url, "demo", "--home", home])
    assert demo.exit_code == 0, demo.output
    assert re.search(r"^PostgreSQL: postgresql://postgres@\S+\s+\(thread demo-1\)", demo.stdout, re.M), demo.stdout
    assert not (Path(home) / "teamgraph.sqlite").exists()
    # The next demo on the same database is demo-2: ids come from PostgreSQL.
    assert runner.invoke(app, ["--db", postgres_url, "demo", "--home", home]).exit_code == 0

    listed = runner.invoke(app, ["--db", postgres_url, "threads", "--home", home])
    assert listed.exit_code == 0, listed.output
    assert re.findall(r"^(demo-\d)\s.*\bdone\b", listed.stdout, re.M) == ["demo-2", "demo-1"], listed.stdout

    history = runner.invoke(
        app, ["--db", postgres_url, "history", "demo-1", "--agent", "UI Operator_1", "--home", home]
    )
    assert history.exit_code == 0, history.output
    assert "UI Operator_1 · ui-operator · idle" in history.stdout

    # TEAMGRAPH_DB works as --db does; an unknown thread lists the known ones.
    missing = runner.invoke(app, ["history", "nope", "--home", home], env={"TEAMGRAPH_DB": postgres_url})
    assert missing.exit_code == 1
    assert "demo-2, demo-1" in missing.stderr

    resumed = runner.invoke(app, ["--db", postgres_url, "resume", "demo-1", "--home", home])
    assert resumed.exit_code == 0, resumed.output
    assert "is finished: nothing to resume" in resumed.stdout


def test_a_paused_cli_run_is_resumed_from_postgres(postgres_url, tmp_path):  # noqa: F811
    import yaml

    script = tmp_path / "plan.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "Team Leader": [
                    {
                        "tool_calls": [
                            {
                                "name": "propose_plan",
                                "args": {
                                    "summary": "Answer alone.",
                                    "steps": [{"title": "Answer", "role_id": "researcher"}],
                                    "complexity": "simple",
                                },
                            }
                        ]
                    },
                    "Answered: 42.",
                ],
            }
        ),
        encoding="utf-8",
    )
    home = str(tmp_path / "home")
    first = runner.invoke(
        app, ["--db", postgres_url, "run", "What is 6 x 7?", "--model", f"scripted:{script}", "--home", home]
    )
    assert first.exit_code == 3, first.output
    assert f"teamgraph --db {postgres_url} resume run-1" in first.stderr

    listed = runner.invoke(app, ["--db", postgres_url, "threads", "--home", home])
    assert re.search(r"^run-1\s.*paused for you \(plan_1\)", listed.stdout, re.M), listed.stdout

    second = runner.invoke(app, ["--db", postgres_url, "resume", "run-1", "--home", home, "--answer", "plan_1=yes"])
    assert second.exit_code == 0, second.output
    assert "Answered: 42." in second.stdout


def test_database_urls_are_shown_without_their_password(tmp_path):
    assert describe_db("postgresql://me:secret@db.example:5432/teams", tmp_path) == (
        "postgresql://me:***@db.example:5432/teams"
    )
    assert describe_db(None, tmp_path) == str(tmp_path / "teamgraph.sqlite")
    assert describe_db("sqlite:///x/y.sqlite", tmp_path) == "x/y.sqlite"


def test_an_unreachable_server_is_one_clear_error(tmp_path):
    pytest.importorskip("psycopg")
    with pytest.raises(ValueError, match=r"Cannot connect to PostgreSQL at postgresql://u:\*\*\*@127\.0\.0\.1:9/x"):
        open_checkpointer("postgresql://u:pw@127.0.0.1:9/x?connect_timeout=2", home=tmp_path)
    result = runner.invoke(app, ["--db", "postgresql://u:pw@127.0.0.1:9/x?connect_timeout=2", "threads"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Cannot connect to PostgreSQL") and "pw" not in result.stderr


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_resumed_thread_writes_snapshots_of_the_histories_it_loaded(database, request, tmp_path, snapshot_every):
    # A resumed run holds histories as History sequences; a DeltaChannel snapshot of them
    # (every `cadence` updates) is stored as plain lists, on both databases.
    from langchain_core.messages import AIMessage, HumanMessage
    from test_calls_in_flight import two_members

    from teamgraph import History

    snapshot_every(3)
    db = request.getfixturevalue("postgres_url") if database == "postgres" else None
    config = {"configurable": {"thread_id": "snapshots"}}
    first = Team(model=ScriptedChatModel(two_members()), home=tmp_path, checkpointer=db)
    first.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    before = first.history(config, "Team Leader")

    turns = sum(isinstance(m, AIMessage) for m in before)
    script = {"Team Leader": [*[""] * turns, "Noted.", "Done."]}
    again = Team(model=ScriptedChatModel(script), home=tmp_path, checkpointer=db)
    graph = again.compile()
    assert isinstance(graph.get_state(config).values["histories"]["Team Leader"], History)
    for text in ("One more thing.", "And another."):
        graph.invoke({"messages": [HumanMessage(text)]}, config)
    after = Team(model=ScriptedChatModel({}), home=tmp_path, checkpointer=db).history(config, "Team Leader")
    assert after[: len(before)] == before
    assert [m.text for m in after if isinstance(m, AIMessage)][-2:] == ["Noted.", "Done."]


def test_a_team_on_postgres_runs_async_with_no_blocking_call_on_the_event_loop(postgres_url, tmp_path):  # noqa: F811
    # NOTE: LangGraph's PostgresSaver has no async methods; the team's lends it its sync ones in worker threads.
    import asyncio

    from blockbuster import blockbuster_ctx
    from langgraph.types import Command
    from test_async import ASK_SCRIPT

    from teamgraph import Policy

    team = Team(
        model=ScriptedChatModel(ASK_SCRIPT), home=tmp_path, checkpointer=postgres_url, policy=Policy(ask="human")
    )
    graph, config = team.compile(), {"configurable": {"thread_id": "pg-async"}}

    async def main() -> tuple[dict, dict, list]:
        with blockbuster_ctx():
            paused = await graph.ainvoke({"messages": [("user", "Design a login page")]}, config)
            done = await graph.ainvoke(Command(resume={"ask_1": "Use blue"}), config)
            return paused, done, await team.ahistory(config, "UI Operator_1")

    paused, done, history = asyncio.run(main())
    assert list(paused["__interrupt__"][0].value["requests"]) == ["ask_1"]
    assert done["messages"][-1].content == "The login page is designed, in blue as you asked."
    assert team.history(config, "UI Operator_1") == history
