"""A picture of a run: ``team.timeline(config)`` and ``teamgraph timeline``.

The timeline is read from the thread's checkpoints only (a team with no model reads
it); every model call, tool call, wait and message of the state is on it, in the lane
of the agent it belongs to.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langgraph.types import Command
from typer.testing import CliRunner

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.audit.timeline import PERSON, build_timeline
from teamgraph.cli import app
from teamgraph.demo import run_demo
from teamgraph.records import LEADER

runner = CliRunner()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The demo run to its end; the home folder and the thread's config."""
    home = tmp_path_factory.mktemp("timeline") / "home"
    _, config = run_demo(home)
    return home, config


def _reader(home: Path, monkeypatch: pytest.MonkeyPatch) -> Team:
    monkeypatch.delenv("TEAMGRAPH_MODEL", raising=False)
    return Team(home=home)  # no model: reading needs none


def test_the_demo_timeline_has_a_lane_per_agent_and_every_event_of_the_state(
    demo: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, config = demo
    team = _reader(home, monkeypatch)
    values = team.state(config)
    timeline = team.timeline(config)

    agents = list(values["agents"])
    assert timeline.lanes == [PERSON, *agents] and timeline.lanes[1] == LEADER
    histories = values["histories"]
    ai = {name: [m for m in histories[name] if isinstance(m, AIMessage)] for name in agents}
    for name in agents:
        assert len([s for s in timeline.spans if s.lane == name and s.kind == "model"]) == len(ai[name]), name
    calls = sum(len(m.tool_calls) for messages in ai.values() for m in messages)
    waits = [s for s in timeline.spans if s.kind in ("wait_agent", "wait_person", "tool")]
    assert len(timeline.marks) + len(waits) == calls
    # The two questions of the demo are waits on agents, in the askers' lanes.
    asked = {r["from"]: r["to"] for r in values["requests"].values()}
    assert {(s.lane, s.label) for s in timeline.spans if s.kind == "wait_agent"} == {
        (asker, f"waits for {to}") for asker, to in asked.items()
    }
    # Every envelope between agents (and the user's task) is an arrow; answers and the report too.
    envelopes = {d["id"] for d in values["deliveries"].values() if d["sender"] != "router"}
    assert {a.label for a in timeline.arrows if a.kind == "message"} == envelopes
    assert {a.label.split()[0] for a in timeline.arrows if a.kind == "answer"} == {*values["requests"], "report"}
    for span in timeline.spans:
        assert 0 <= span.start <= span.end <= timeline.duration
    # Each agent's model calls follow one another.
    for name in agents:
        model = [s for s in timeline.spans if s.lane == name and s.kind == "model"]
        assert all(a.end <= b.start + 1e-9 for a, b in zip(model, model[1:], strict=False)), name


def test_the_timeline_is_drawn_as_png_and_html(demo: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    home, config = demo
    timeline = _reader(home, monkeypatch).timeline(config)
    png = timeline.png()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and timeline._repr_png_() == png
    html = timeline.html()
    assert "<html>" in html and "plotly" in html.lower() and "Full-Stack Engineer_1" in html
    with pytest.raises(ValueError, match=r"\.png or \.html"):
        timeline.save(home / "picture.svg")


def test_a_wait_for_a_person_is_in_the_askers_lane_and_the_person_has_a_lane(tmp_path: Path) -> None:
    script = {
        LEADER: [
            {"tool_calls": [{"name": "propose_plan", "args": {"summary": "s", "steps": [{"title": "t"}]}}]},
            "Done.",
        ]
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path / "home", policy=Policy(plan="human"))
    graph = team.compile()
    config = {"configurable": {"thread_id": "plan"}}
    graph.invoke({"messages": [("user", "x")]}, config)
    graph.invoke(Command(resume={"plan_1": {"approve": True, "feedback": ""}}), config)
    timeline = team.timeline(config)
    assert timeline.lanes == [PERSON, LEADER]
    assert [(s.lane, s.label) for s in timeline.spans if s.kind == "wait_person"] == [(LEADER, "waits for person")]
    kinds = [(a.sender, a.receiver, a.kind) for a in timeline.arrows]
    assert (LEADER, PERSON, "request") in kinds and (PERSON, LEADER, "answer") in kinds


def test_a_thread_without_checkpoints_has_an_empty_timeline() -> None:
    timeline = build_timeline("none", [])
    assert timeline.lanes == [] and timeline.spans == [] and timeline.duration == 0.0


def test_teamgraph_timeline_writes_the_picture_and_stats_links_it(
    demo: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, config = demo
    monkeypatch.delenv("TEAMGRAPH_MODEL", raising=False)
    thread = config["configurable"]["thread_id"]
    result = runner.invoke(app, ["timeline", thread, "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert (home / "exports" / f"{thread}-timeline.png").read_bytes().startswith(b"\x89PNG")
    html = home / "h.html"
    result = runner.invoke(app, ["timeline", thread, "--home", str(home), "--format", "html", "--out", str(html)])
    assert result.exit_code == 0 and html.is_file(), result.output
    bad = runner.invoke(app, ["timeline", thread, "--home", str(home), "--format", "svg"])
    assert bad.exit_code == 1 and "png, html" in bad.stderr
    stats = runner.invoke(app, ["stats", thread, "--home", str(home)])
    assert f"teamgraph timeline {thread} --home {home}" in stats.stdout
