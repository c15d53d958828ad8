"""The `teamgraph` command in a real pseudo-terminal (80 and 120 columns), under Ctrl-C, and piped.

Runs the demo (a scripted team with ``--latency`` seconds per model call, so calls are
in flight when Ctrl-C comes) with pexpect; reads piped output through typer's runner.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from test_cli import TWO_WRITERS, invoke, plain_env, runner, script  # noqa: F401

from teamgraph.cli import app

CURSOR_MOVES = re.compile(r"\x1b\[[0-9;]*[ABCDHJK]|\r")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
DEMO_AGENTS = ("Team Leader", "UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1")


def spawn_cli(tmp_path: Path, *args: str, columns: int = 120, timeout: float = 60):
    """`teamgraph ARGS` in a real pseudo-terminal ``columns`` wide, in ``tmp_path``."""
    pexpect = pytest.importorskip("pexpect")
    dropped = ("TEAMGRAPH_MODEL", "FORCE_COLOR", "NO_COLOR", "COLUMNS", "LINES")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["TERM"] = "xterm"
    return pexpect.spawn(
        sys.executable,
        ["-m", "teamgraph.cli", *args],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=timeout,
        dimensions=(50, columns),
    )


def screen_text(child) -> str:
    """Everything the child printed, without colours and cursor moves."""
    return ANSI.sub("", CURSOR_MOVES.sub("\n", child.before or ""))


def run_to_end(tmp_path: Path, *args: str, columns: int) -> tuple[str, int]:
    pexpect = pytest.importorskip("pexpect")
    child = spawn_cli(tmp_path, *args, columns=columns)
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close()
    return screen_text(child), child.exitstatus


def assert_names_whole(text: str, names: tuple[str, ...], columns: int) -> None:
    """No line wider than the terminal; every table row names its agent (or id) whole."""
    for line in text.splitlines():
        assert len(line) <= columns, f"{len(line)} > {columns}: {line!r}"
    for name in names:
        assert name in text, name
    firsts = [m.group(1) for line in text.splitlines() if (m := re.match(r"^\s*(?:▶\s)?(\S.*?)(?:\s{2,}|$)", line))]
    for cell in firsts:
        for name in names:
            if cell != name and cell.startswith(name[:4]) and not cell.startswith(name):
                assert cell in names, f"{cell!r} is a cut {name!r}"
        assert "…" not in cell or not any(cell.startswith(n[:4]) for n in names), cell


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_tables_keep_names_statuses_and_ids_whole(tmp_path: Path, columns: int) -> None:
    text, status = run_to_end(tmp_path, "demo", "--latency", "0.05", columns=columns)
    assert status == 0, text
    # The live view (drawn while it ran) and the summary: every agent whole, statuses whole.
    assert_names_whole(text, DEMO_AGENTS, columns)
    assert re.search(r"Full-Stack Engineer_1\s+(full-stack-engineer\s+)?idle\s", text), text
    assert "step " in text and "Task board" not in text  # the demo does not use the board

    threads, status = run_to_end(tmp_path, "threads", columns=columns)
    assert status == 0, threads
    assert re.search(r"^demo-1\s.*\bdone\b", threads, re.M), threads

    stats, status = run_to_end(tmp_path, "stats", "demo-1", columns=columns)
    assert status == 0, stats
    assert_names_whole(stats, DEMO_AGENTS, columns)
    for name in DEMO_AGENTS:  # every agent's row whole, with its model and tool calls
        assert re.search(rf"^{name}\s+\d+\s+\d+\s+\d+\s", stats, re.M), (name, stats)
    assert re.search(r"^Full-Stack Engineer_1\s+Team Leader\s+\d+", stats, re.M), stats  # who called whom

    roles, status = run_to_end(tmp_path, "roles", columns=columns)
    assert status == 0, roles
    for role_id in ("team-leader", "full-stack-engineer", "project-manager", "code-reviewer", "skill-teacher"):
        assert re.search(rf"^{role_id}\s", roles, re.M), (role_id, roles)
    assert_names_whole(roles, ("full-stack-engineer", "project-manager"), columns)


@pytest.mark.slow
def test_ctrl_c_waits_for_the_calls_in_flight_then_resume_finishes(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    child = spawn_cli(tmp_path, "demo", "--latency", "1.5", columns=120)
    try:
        child.expect("UI Operator_2")  # the members are created: their model calls are in flight
        child.sendintr()
        child.expect(r"stopping: waiting for (\d+) model calls? in flight")
        in_flight = int(child.match.group(1))
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close()
    text = screen_text(child)
    assert in_flight >= 1
    assert child.exitstatus == 130, text
    assert "Traceback" not in text and "teamgraph resume demo-1" in text, text

    home = str(tmp_path / ".teamgraph")
    listed = invoke("threads", "--home", home)
    assert re.search(r"^demo-1\s.*\bstopped\b", listed.stdout, re.M), listed.stdout

    resumed = invoke("resume", "demo-1", "--home", home)
    assert resumed.exit_code == 0, resumed.output
    assert "The login feature is built." in resumed.stdout
    assert re.search(r"^demo-1\s.*\bdone\b", invoke("threads", "--home", home).stdout, re.M)


@pytest.mark.slow
def test_a_second_ctrl_c_quits_at_once_without_a_traceback(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    child = spawn_cli(tmp_path, "demo", "--latency", "5", columns=120)
    try:
        child.expect("UI Operator_2")
        child.sendintr()
        child.expect("stopping: waiting for")
        child.sendintr()
        child.expect(pexpect.EOF, timeout=4)  # well before the 5 s calls in flight end
    finally:
        child.close()
    assert child.exitstatus == 130
    assert "Traceback" not in screen_text(child)


def test_piped_output_prints_one_line_per_agent_step(tmp_path: Path) -> None:
    result = invoke(
        "run", "Write two notes", "--model", script(tmp_path, TWO_WRITERS), "--home", str(tmp_path / "h"), "--no-plan"
    )
    assert result.exit_code == 0, result.output
    steps = re.findall(r"^\[\s*[\d.]+s\] (.+?): (.+)$", result.stdout, re.M)
    assert ("Researcher_1", "called write_file") in steps and ("Researcher_2", "called write_file") in steps
    assert ("Team Leader", "called create_sub_agent, create_sub_agent") in steps
    assert ("Team Leader", "said: Both notes are written: notes/a.md and notes/b.md.") in steps
    # One line per model call of each agent.
    assert sum(1 for who, _ in steps if who == "Researcher_1") == 2


def test_no_plan_reads_as_a_flag() -> None:
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "120"})
    line = next(line for line in result.stdout.splitlines() if "--no-plan" in line)
    assert "<bool>" not in line and "BOOLEAN" not in line


def test_the_live_view_names_tools_counts_tokens_and_shows_the_board() -> None:
    from langchain_core.messages import AIMessage, ToolMessage
    from rich.console import Console

    from teamgraph.cli import TeamView

    usage = {"input_tokens": 1200, "output_tokens": 34, "total_tokens": 1234}
    earlier = AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": "c0"}], usage_metadata=usage)
    view = TeamView(
        "run-7",
        {
            "agents": {
                "UI Operator_1": {
                    "role": "ui-operator",
                    "status": "running",
                    "steps": 1,
                    "last_action": "1 tool call(s)",
                }
            },
            "histories": {"UI Operator_1": [earlier, ToolMessage("x", tool_call_id="c0")]},
            "team": {
                "tick": 3,
                "board": [
                    {"id": "task_1", "title": "Design the login page", "status": "doing", "assignee": "UI Operator_1"}
                ],
            },
        },
    )
    step = AIMessage(
        "",
        tool_calls=[{"name": "write_file", "args": {}, "id": "c1"}, {"name": "send_message", "args": {}, "id": "c2"}],
        usage_metadata={"input_tokens": 90, "output_tokens": 10, "total_tokens": 100},
    )
    lines = view.apply("ui-operator", {"histories": {"UI Operator_1": [step]}})

    assert re.fullmatch(r"\[\s*[\d.]+s\] UI Operator_1: called write_file, send_message · 100 tokens", lines[0])
    assert view.tokens == {"UI Operator_1": 1334}
    out = Console(width=80, record=True, color_system=None)
    out.print(view)
    text = out.export_text()
    assert re.search(r"thread run-7 · step 3 · \d+s · 1,334 tokens", text)
    # The tools of the latest step lead the action (the registry only says "1 tool call(s)").
    assert re.search(r"UI Operator_1\s+ui-operator\s+running\s+1\s+1,334\s+write_file, send_mes", text), text
    assert re.search(r"Task board.*?\ntask_1\s+doing\s+UI Operator_1\s+Design the login page", text, re.S), text


def test_a_table_leaves_out_its_optional_columns_before_it_outgrows_the_terminal() -> None:
    from rich.console import Console

    from teamgraph.cli.output import Column, fit_table

    columns = [Column("agent"), Column("calls"), Column("note", optional=True), Column("cost", optional=True)]
    rows = [["Full-Stack Engineer_1", "12", "x" * 30, "0.0123"]]
    for width, kept in ((120, 4), (70, 3), (40, 2)):
        table = fit_table(columns, rows, width=width)
        assert [c.header for c in table.columns] == [c.header for c in columns[:kept]], width
        out = Console(width=width, record=True, color_system=None)
        out.print(table)
        assert "Full-Stack Engineer_1" in out.export_text(), width
