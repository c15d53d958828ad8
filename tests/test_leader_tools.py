"""The Team Leader's full toolset (leader spec): memory, web search, MCP, files, terminal, skills."""

from __future__ import annotations

import sys
import textwrap

from langgraph.store.sqlite import SqliteStore
from scripting import act, call

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.messaging.results import error_of
from teamgraph.records import LEADER
from teamgraph.tools import tools_for_role
from teamgraph.tools.search import source_id

R1 = "Researcher_1"


def _leader_results(team: Team, config: dict, tool: str) -> list:
    history = team.history(config, LEADER)
    ids = {c["id"] for m in history for c in getattr(m, "tool_calls", []) if c["name"] == tool}
    return [m for m in history if getattr(m, "tool_call_id", None) in ids]


def test_memory_is_shared_by_the_threads_of_one_home(tmp_path):
    """Leader spec (the leader's memory): a note kept in one thread is recalled in another, and after a restart."""

    def leader(messages):
        asked = str(messages[-1].content) if messages[-1].type == "human" else ""
        if "Remember" in asked:
            return act(call("remember", key="deploy-steps", note="Build, test, then tag the release."))
        if "How do we deploy" in asked:
            return act(call("recall", query="deploy release steps"))
        return "Done."

    home = tmp_path / "home"
    team = Team(model=ScriptedChatModel({LEADER: [leader] * 4}), home=home)
    first, second = ({"configurable": {"thread_id": t}} for t in ("t1", "t2"))
    team.compile().invoke({"messages": [("user", "Remember how we deploy.")]}, first)
    team.graph.invoke({"messages": [("user", "How do we deploy?")]}, second)
    [recalled] = _leader_results(team, second, "recall")
    assert error_of(recalled) is None and "Build, test, then tag the release." in str(recalled.content)
    assert isinstance(team.runtime.store, SqliteStore)  # NOTE: in the checkpointer's database

    again = Team(model=ScriptedChatModel({LEADER: [leader] * 4}), home=home)  # NOTE: a new process
    third = {"configurable": {"thread_id": "t3"}}
    again.compile().invoke({"messages": [("user", "How do we deploy?")]}, third)
    assert "tag the release" in str(_leader_results(again, third, "recall")[0].content)


def test_web_search_uses_the_configured_provider_and_gives_source_ids(tmp_path):
    """Leader spec (search; citations for sources): a pluggable provider, offline here; none → no tool."""
    asked: list[tuple[str, int]] = []

    def provider(query: str, max_results: int) -> list[dict]:
        asked.append((query, max_results))
        return [{"title": "JWT vs cookies", "url": "https://example.org/auth", "snippet": "Cookies revoke easily."}]

    script = {LEADER: [act(call("web_search", query="jwt or cookies", max_results=3)), "Cookies [1]."]}
    team = Team(model=ScriptedChatModel(script), home=tmp_path / "home", search=provider)
    config = {"configurable": {"thread_id": "s"}}
    team.compile().invoke({"messages": [("user", "JWT or cookies?")]}, config)
    [found] = _leader_results(team, config, "web_search")
    assert asked == [("jwt or cookies", 3)]
    assert str(found.content).startswith(f"[{source_id('https://example.org/auth')}] JWT vs cookies — https://")
    leader_role = team.runtime.roles["team-leader"]
    plain = Team(model=ScriptedChatModel({}), home=tmp_path / "plain")
    assert "web_search" not in {t.name for t in tools_for_role(plain.runtime, leader_role)}


SERVER = textwrap.dedent(
    """
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("calc")

    @server.tool()
    def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    server.run("stdio")
    """
)

ROLE = """---
id: calculator
name: Calculator
description: Adds numbers with the calc MCP server.
tools: [member]
mcp: [calc]
---

You add numbers.
"""


def test_mcp_tools_of_a_stdio_server_reach_the_leader_and_the_roles_that_list_it(tmp_path):
    """Leader spec (the leader's MCP): a real local stdio MCP server (FastMCP), its tools by configuration."""
    (tmp_path / "server.py").write_text(SERVER, encoding="utf-8")
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "calculator.md").write_text(ROLE, encoding="utf-8")
    servers = {"calc": {"transport": "stdio", "command": sys.executable, "args": [str(tmp_path / "server.py")]}}
    script = {
        LEADER: [
            act(call("add", a=2, b=3), call("create_sub_agent", role_id="calculator", task="Add 4 and 5.")),
            *[""] * 4,
        ],
        "Calculator_1": [act(call("add", a=4, b=5)), "9"],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path / "home", roles_dir=roles, mcp_servers=servers)
    config = {"configurable": {"thread_id": "m"}}
    team.compile().invoke({"messages": [("user", "Add.")]}, config)
    [mine] = _leader_results(team, config, "add")
    assert error_of(mine) is None and "5" in str(mine.content)
    member = [m for m in team.history(config, "Calculator_1") if m.type == "tool"]
    assert error_of(member[0]) is None and "9" in str(member[0].content)
    researcher = team.runtime.roles["researcher"]
    assert "add" not in {t.name for t in tools_for_role(team.runtime, researcher)}


def test_the_leader_has_the_full_toolset_of_seed_001(tmp_path):
    """Leader spec: file read/write/edit, terminal (under the allow-list), search, skills, memory."""
    team = Team(model=ScriptedChatModel({}), home=tmp_path / "home", search=lambda q, n: [])
    names = {t.name for t in tools_for_role(team.runtime, team.runtime.roles["team-leader"])}
    assert {"read_file", "write_file", "edit_file", "run_command", "web_search", "read_skill", "remember"} <= names


def test_the_leader_runs_an_allowed_command(tmp_path):
    """Leader spec (terminal) under collaboration spec §4.3: the leader runs a command on the allow-list at once."""
    script = {LEADER: [act(call("run_command", command="python -c print(6*7)")), "42."]}
    team = Team(model=ScriptedChatModel(script), home=tmp_path / "home", policy=Policy(commands=("python",)))
    config = {"configurable": {"thread_id": "c"}}
    team.compile().invoke({"messages": [("user", "Compute.")]}, config)
    [ran] = _leader_results(team, config, "run_command")
    assert error_of(ran) is None and "42" in str(ran.content)


def test_notes_go_to_the_store_the_running_graph_was_given(tmp_path) -> None:
    """Under the API server (or a parent graph with a store) notes are in that store, shared by its replicas."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.memory import InMemoryStore
    from typing_extensions import TypedDict

    from teamgraph.runtime import TeamRuntime

    class Seen(TypedDict, total=False):
        store: object

    runtime = TeamRuntime(home=tmp_path, policy=Policy())
    served = InMemoryStore()
    builder = StateGraph(Seen)
    builder.add_node("probe", lambda state: {"store": runtime.memory()[0]})
    builder.add_edge(START, "probe")
    builder.add_edge("probe", END)
    assert builder.compile(store=served).invoke({})["store"] is served
    assert builder.compile().invoke({})["store"] is runtime.memory()[0] is not served
