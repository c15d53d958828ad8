"""Token accounting (real ChatOpenAI over HTTP, streamed too), stats, export and their CLI commands."""

from __future__ import annotations

import json
import re

import pytest
import sqlite_utils
from audit_fixtures import CONFIG, LEADER_TURN, LOGIN_SCRIPT, SECRETS, login_team
from conftest import FakeClock
from langchain_core.messages import AIMessage
from typer.testing import CliRunner

from teamgraph import Team
from teamgraph.audit import flush_log
from teamgraph.audit.export import export_thread
from teamgraph.cli import app

LEADER = "Team Leader"
PRICES = {"gpt-test": {"input": 2.0, "output": 8.0}}
DELEGATION = {
    LEADER: [
        {
            "content": None,
            "tool_calls": [
                {"name": "create_sub_agent", "arguments": {"role_id": "researcher", "task": "Compare cookies and JWT."}}
            ],
        },
        "",
        "Researcher_1 recommends session cookies.",
    ],
    "Researcher_1": [
        {
            "content": None,
            "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "cookies"}}],
        },
        "Session cookies: simpler revocation.",
    ],
}


def agent_of(body: dict) -> str:
    match = re.search(r"# You are (.+?)\.\n", body["messages"][0]["content"])
    return match.group(1) if match else LEADER


@pytest.fixture
def priced_team(openai_server, monkeypatch, tmp_path):
    """A team on the real ChatOpenAI client against the local server, with a price table."""
    server = openai_server(
        lambda body: DELEGATION[agent_of(body)][sum(m["role"] == "assistant" for m in body["messages"])]
    )
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    team = Team(model="openai:gpt-test", home=tmp_path / "home", prices=PRICES)
    return server, team


def _assert_totals_match_the_server(server, team, config) -> None:
    agents = team.agents(config)
    for name, record in agents.items():
        history = team.history(config, name)
        assert record["tokens"]["input"] == sum(
            m.usage_metadata["input_tokens"] for m in history if isinstance(m, AIMessage)
        )
        assert record["tokens"]["output"] == sum(
            m.usage_metadata["output_tokens"] for m in history if isinstance(m, AIMessage)
        )
        assert record["tokens"]["calls"] == sum(isinstance(m, AIMessage) for m in history) > 0
    team_in = sum(r["tokens"]["input"] for r in agents.values())
    team_out = sum(r["tokens"]["output"] for r in agents.values())
    assert len(server.usages) == len(server.requests) == sum(r["tokens"]["calls"] for r in agents.values())
    assert team_in == sum(u["prompt_tokens"] for u in server.usages) > 0
    assert team_out == sum(u["completion_tokens"] for u in server.usages) > 0
    stats = team.stats(config)
    assert (stats["team"]["input"], stats["team"]["output"]) == (team_in, team_out)
    assert stats["team"]["cost"] == pytest.approx((team_in * 2.0 + team_out * 8.0) / 1_000_000)


def test_token_totals_equal_the_usage_the_provider_reported(priced_team):
    server, team = priced_team
    team.compile().invoke({"messages": [("user", "Cookies or JWT?")]}, CONFIG)
    assert not any(r.get("stream") for r in server.requests)
    _assert_totals_match_the_server(server, team, CONFIG)


def test_streamed_runs_report_token_usage_too(priced_team):
    server, team = priced_team
    for _ in team.compile().stream(
        {"messages": [("user", "Cookies or JWT?")]}, CONFIG, stream_mode="messages", subgraphs=True
    ):
        pass
    assert server.requests and all(r.get("stream") for r in server.requests)
    assert all(r["stream_options"] == {"include_usage": True} for r in server.requests)
    _assert_totals_match_the_server(server, team, CONFIG)


def test_a_bad_price_table_is_refused_with_an_example(tmp_path):
    with pytest.raises(ValueError, match=r"prices\['gpt-test'\] must be .*Example"):
        Team(model="openai:gpt-test", home=tmp_path, prices={"gpt-test": {"input": 1}})


# --- stats and export on a scripted thread ----------------------------------------


@pytest.fixture
def login_run(tmp_path):
    clock = FakeClock()

    def leader(messages):
        clock.advance(30)  # NOTE: each leader step takes 30 s, so response times are not zero
        return LEADER_TURN(messages)

    script = {**LOGIN_SCRIPT, LEADER: [LOGIN_SCRIPT[LEADER][0], *[leader] * 8]}
    team = login_team(tmp_path / "home", clock=clock, script=script)
    team.compile().invoke({"messages": [("user", f"Build a login page. password={SECRETS[1]}")]}, CONFIG)
    flush_log(team, CONFIG)
    return team


def test_stats_count_calls_errors_pairs_patterns_and_response_times(login_run):
    stats = login_run.stats(CONFIG)
    member = stats["agents"]["UI Operator_1"]
    assert (member["model_calls"], member["tool_calls"], member["errors"]) == (4, 3, 1)
    assert member["success_rate"] == pytest.approx(2 / 3, abs=1e-3)
    assert member["recovery_calls"] == [1]  # the read failed, the next call (ask_master) succeeded
    assert stats["agents"][LEADER]["errors"] == 0
    assert stats["failing_patterns"] == [
        {
            "pattern": "read_file: No file 'missing.txt' in the project folder. Use list_files to see what exists.",
            "count": 1,
        }
    ]
    pairs = {(p["sender"], p["receiver"]): p for p in stats["pairs"]}
    assert pairs[("UI Operator_1", LEADER)]["failed"] == 0
    assert pairs[("UI Operator_1", LEADER)]["count"] >= 2  # ask_master, the question, the final report
    assert pairs[(LEADER, "UI Operator_1")]["success"] >= 1
    (ask,) = stats["requests"]
    assert (ask["id"], ask["status"]) == ("ask_1", "answered")
    assert ask["seconds"] > 0 and ask["seconds"] % 30 == 0


def test_export_markdown_has_task_report_conversations_requests_files_and_tokens(login_run, tmp_path):
    path = export_thread(login_run, CONFIG, format="md", out=tmp_path / "t.md")
    text = path.read_text(encoding="utf-8")
    for heading in (
        "## Task",
        "## Report of the Team Leader",
        "## Tokens",
        "## Team Leader (",
        "## UI Operator_1 (",
        "## Requests",
        "## Files",
    ):
        assert heading in text
    assert "Login page ready." in text.split("## Report of the Team Leader")[1].split("##")[0]
    assert "| ask_1 | ask | UI Operator_1 | Team Leader | answered |" in text
    assert "- `web/login.html`" in text
    for secret in SECRETS:
        assert secret not in text


def test_export_json_holds_every_record(login_run, tmp_path):
    data = json.loads(export_thread(login_run, CONFIG, format="json", out=tmp_path / "t.json").read_text())
    assert {a["name"] for a in data["agents"]} == {LEADER, "UI Operator_1"}
    assert [r["id"] for r in data["requests"]] == ["ask_1"]
    state = login_run.state(CONFIG)
    assert len(data["messages"]) == sum(len(h) for h in state["histories"].values())
    assert len(data["deliveries"]) == len(state["deliveries"])
    assert data["log"] and {e["kind"] for e in data["log"]} == {"call", "task", "file"}


def test_export_sqlite_is_queryable_with_sqlite_utils(login_run, tmp_path):
    path = export_thread(login_run, CONFIG, format="sqlite", out=tmp_path / "t.db")
    db = sqlite_utils.Database(path)
    assert set(db.table_names()) >= {"agents", "messages", "requests", "deliveries", "log"}
    counts = {r["agent"]: r["n"] for r in db.query("select agent, count(*) as n from messages group by agent")}
    assert counts == {name: len(h) for name, h in login_run.state(CONFIG)["histories"].items()}
    calls = [json.loads(r["tool_calls"]) for r in db.query("select tool_calls from messages where type = 'ai'")]
    assert {c["name"] for batch in calls for c in batch} >= {
        "create_sub_agent",
        "write_file",
        "read_file",
        "ask_master",
    }
    failed = list(db.query("select sender, code from log where result = 'failed'"))
    assert {"sender": "UI Operator_1", "code": "TOOL_ERROR"} in failed
    assert db["requests"].get("ask_1")["status"] == "answered"
    assert db["agents"].get("UI Operator_1")["role"] == "ui-operator"


def test_export_refuses_an_unknown_format(login_run):
    with pytest.raises(ValueError, match="md, json, sqlite"):
        export_thread(login_run, CONFIG, format="csv")  # type: ignore[arg-type]


def test_cli_stats_and_export(login_run, tmp_path):
    runner = CliRunner()
    home = str(login_run.home)
    result = runner.invoke(app, ["stats", "login", "--json", "--home", home])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["agents"]["UI Operator_1"]["errors"] == 1
    result = runner.invoke(app, ["stats", "login", "--home", home])
    assert result.exit_code == 0 and "Failing patterns" in result.stdout
    out = tmp_path / "cli.db"
    result = runner.invoke(app, ["export", "login", "--format", "sqlite", "--out", str(out), "--home", home])
    assert result.exit_code == 0, result.output
    assert sqlite_utils.Database(out)["messages"].count > 0
    result = runner.invoke(app, ["export", "login", "--format", "csv", "--home", home])
    assert result.exit_code != 0 and "md, json, sqlite" in result.output


def test_the_live_view_adds_up_the_tokens_of_each_step():
    from rich.console import Console

    from teamgraph.cli.live import TeamView

    view = TeamView("t1", {"agents": {LEADER: {"role": "team-leader", "status": "running"}}})
    usage = {"input_tokens": 120, "output_tokens": 7, "total_tokens": 127}
    for _ in range(2):
        view.apply("leader", {"histories": {LEADER: [AIMessage(content="ok", usage_metadata=usage)]}})
    assert view.tokens[LEADER] == 254
    console = Console(record=True, width=160)
    console.print(view)
    assert "254" in console.export_text()
