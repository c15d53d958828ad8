"""``teamgraph export --format sqlite`` on every kind of thread (issue 33, point 7).

sqlite-utils types a column by ``type(value)`` exactly: a LangChain ``TextAccessor``
(a message's ``.text``) in a column whose values hold no secret to mask crashed the
export. These threads cover the demo, a plain scripted team and a team with every
message kind (system, user, AI with text blocks, tool results and tool errors,
envelopes, a question answered by a person).
"""

from __future__ import annotations

import json

import sqlite_utils
from langchain_core.messages import AIMessage
from scripting import act, call, on_message
from typer.testing import CliRunner

from teamgraph import ScriptedChatModel, Team
from teamgraph.audit.export import export_thread
from teamgraph.cli import app
from teamgraph.demo import run_demo

LEADER = "Team Leader"
MEMBER = "Researcher_1"


def _every_kind_script() -> dict:
    leader_turn = on_message(
        {
            "id: ask_1": act(call("answer_sub_agent_question", question_id="ask_1", answer="Go.")),
            f"Result from {MEMBER}": AIMessage(content=[{"type": "text", "text": "Both compared."}]),
        }
    )
    return {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Compare two options.")), *[leader_turn] * 6],
        MEMBER: [
            act(call("write_file", path="notes.md", content="two options")),
            act(call("read_file", path="missing.md")),
            act(call("ask_master", question="Which first?")),
            AIMessage(content=[{"type": "text", "text": "Compared."}]),
        ],
    }


def _assert_sqlite_matches(team: Team, config: dict, path) -> None:
    db = sqlite_utils.Database(path)
    assert set(db.table_names()) >= {"agents", "messages", "requests", "deliveries", "log"}
    histories = team.state(config)["histories"]
    counts = {r["agent"]: r["n"] for r in db.query("select agent, count(*) as n from messages group by agent")}
    assert counts == {name: len(h) for name, h in histories.items()}
    for row in db.query("select content from messages"):
        assert type(row["content"]) is str


def test_export_sqlite_of_a_plain_scripted_thread(tmp_path):
    """Collaboration spec §6 (the collaboration record): a thread whose texts hold no secret exports to SQLite."""
    team = Team(model=ScriptedChatModel({LEADER: ["Done."]}), home=tmp_path / "home")
    config = {"configurable": {"thread_id": "plain"}}
    team.compile().invoke({"messages": [("user", "Say done.")]}, config)
    path = export_thread(team, config, format="sqlite", out=tmp_path / "plain.db")
    _assert_sqlite_matches(team, config, path)
    assert [r["type"] for r in sqlite_utils.Database(path).query("select type from messages")][-1] == "ai"


def test_export_sqlite_of_every_message_kind(tmp_path):
    """Collaboration spec §6, leader spec (envelopes): every message kind (user, AI, tool) is exported."""
    team = Team(model=ScriptedChatModel(_every_kind_script()), home=tmp_path / "home")
    config = {"configurable": {"thread_id": "kinds"}}
    team.compile().invoke({"messages": [("user", "Compare two options.")]}, config)
    path = export_thread(team, config, format="sqlite", out=tmp_path / "kinds.db")
    _assert_sqlite_matches(team, config, path)
    db = sqlite_utils.Database(path)
    assert {r["type"] for r in db.query("select type from messages")} == {"human", "ai", "tool"}
    assert {r["status"] for r in db.query("select status from messages where type = 'tool'")} == {"success", "error"}
    assert db["requests"].get("ask_1")["status"] == "answered"
    texts = [r["content"] for r in db.query("select content from messages where type = 'ai'")]
    assert "Compared." in texts and "Both compared." in texts
    data = json.loads(export_thread(team, config, format="json", out=tmp_path / "kinds.json").read_text())
    assert data["files"] == ["notes.md"]


def test_cli_exports_the_demo_to_sqlite(tmp_path):
    """Collaboration spec §6: ``teamgraph export <thread> --format sqlite`` on the demo thread."""
    team, config = run_demo(home=tmp_path / "home")
    thread = config["configurable"]["thread_id"]
    out = tmp_path / "demo.db"
    result = CliRunner().invoke(
        app, ["export", thread, "--format", "sqlite", "--out", str(out), "--home", str(tmp_path / "home")]
    )
    assert result.exit_code == 0, result.output
    _assert_sqlite_matches(team, config, out)
