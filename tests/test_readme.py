"""The README keeps its promises: its Python blocks run as printed, its picture is the code's graph."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from docs import gen_graph

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RUNNABLE_PAGES = (
    "README.md",
    "docs/how-to/add-a-tool.md",
    "docs/how-to/streaming-and-async.md",
    "docs/how-to/subgraph.md",
)
LEADER = "Team Leader"
MEMBER = "UI Operator_1"
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

# What a model says to the README's task: the leader proposes a plan (a person approves
# it), creates a member; the member asks a question (a person answers it), writes a
# file and answers; the leader reports.
TEAM_SCENARIO: dict[str, list[Any]] = {
    LEADER: [
        {
            "content": None,
            "tool_calls": [
                {
                    "name": "propose_plan",
                    "arguments": {
                        "summary": "One page, one member.",
                        "steps": [{"title": "Build the login page", "role_id": "ui-operator"}],
                        "complexity": "simple",
                    },
                }
            ],
        },
        {
            "content": None,
            "tool_calls": [
                {"name": "create_sub_agent", "arguments": {"role_id": "ui-operator", "task": "Build the login page."}}
            ],
        },
        "",
    ],
    MEMBER: [
        {"content": None, "tool_calls": [{"name": "ask_master", "arguments": {"question": "JWT or cookies?"}}]},
        {"content": None, "tool_calls": [{"name": "write_file", "arguments": {"path": "login.html", "content": "ok"}}]},
        "The login page is in login.html; it signs in with JWT.",
    ],
}
REPORT = "UI Operator_1 built the login page (login.html, JWT)."


def agent_of(body: dict[str, Any]) -> str:
    """Which agent sent a request: members' system prompts say "# You are <name>."."""
    match = re.search(r"# You are (.+?)\.\n", body["messages"][0]["content"])
    return match.group(1) if match else LEADER


def scenario_answer(body: dict[str, Any]) -> Any:
    """The agent's next turn in ``TEAM_SCENARIO``; past its turns, the report."""
    turns = TEAM_SCENARIO.get(agent_of(body), [])
    done = sum(1 for message in body["messages"] if message["role"] == "assistant")
    return turns[done] if done < len(turns) else REPORT


def python_blocks(markdown: str) -> list[tuple[int, str]]:
    """Every fenced ```python block of ``markdown``, with the line its code starts on."""
    return [(markdown.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in FENCE.finditer(markdown)]


def run_block(code: str, *, cwd: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a user would: a fresh interpreter in an empty folder, the model's endpoint in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEAMGRAPH_", "OPENAI_", "LANGSMITH_"))}
    env |= {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


README_BLOCKS = python_blocks(README.read_text(encoding="utf-8"))
BLOCKS = [
    (page, line, code)
    for page in RUNNABLE_PAGES
    for line, code in python_blocks((ROOT / page).read_text(encoding="utf-8"))
]


def test_the_readme_has_python_blocks():
    assert README_BLOCKS, "README.md has no ```python block: the quickstart is gone"


@pytest.mark.parametrize(("page", "line", "code"), BLOCKS, ids=[f"{page}:{line}" for page, line, _ in BLOCKS])
def test_python_block_runs_as_printed(page, line, code, tmp_path, openai_server):
    done = run_block(code, cwd=tmp_path, base_url=openai_server(scenario_answer).base_url)
    assert done.returncode == 0, f"{page}'s block at line {line} failed as printed:\n{done.stderr[-3000:]}"


def test_the_quickstart_answers_each_pause_and_prints_the_report(tmp_path, openai_server):
    code = next(code for _, code in README_BLOCKS if "graph.invoke(" in code)
    done = run_block(code, cwd=tmp_path, base_url=openai_server(scenario_answer).base_url)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout.splitlines()
    # Both pauses were met and answered: the plan's (the default policy's), then the member's question.
    assert printed[0].startswith("plan_1 plan") and printed[1].startswith("ask_2 ask")
    assert REPORT in printed
    assert (tmp_path / ".teamgraph" / "project" / "t1" / "login.html").exists()


def test_block_extraction_finds_each_python_fence_and_its_line():
    markdown = "# t\n\n```python\nx = 1\n```\n\n```bash\nls\n```\n```python\ny = 2\nz = 3\n```\n"
    assert python_blocks(markdown) == [(4, "x = 1\n"), (11, "y = 2\nz = 3\n")]


def test_readme_picture_is_what_the_code_draws():
    block = gen_graph.current_block(README.read_text(encoding="utf-8"))
    expected = gen_graph.picture_block(gen_graph.demo_mermaid())
    assert block == expected, (
        f"README.md's picture of the team graph differs from what the code draws: run `{gen_graph.COMMAND}`"
    )


def test_picture_markers_missing_are_named():
    with pytest.raises(ValueError, match="graph:begin"):
        gen_graph.current_block("# a README without a picture\n")


def test_redrawing_replaces_only_the_marked_block():
    readme = f"intro\n{gen_graph.BEGIN}\nold\n{gen_graph.END}\noutro\n"
    redrawn = gen_graph.with_picture(readme, "graph TD;\n\ta --> b;\n")
    assert redrawn == f"intro\n{gen_graph.BEGIN}\n```mermaid\ngraph TD;\n\ta --> b;\n```\n{gen_graph.END}\noutro\n"
