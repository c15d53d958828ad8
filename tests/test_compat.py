"""teamgraph.compat: the LangGraph internals we read, guarded, pinned and in one module."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import operator
import sys
import tomllib
import types
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from packaging.requirements import Requirement
from packaging.version import Version

from teamgraph import compat

ROOT = Path(__file__).resolve().parent.parent
PRIVATE = "langgraph._internal._constants"
# NOTE: the values these keys have in the langgraph releases we test (1.2.x).
KNOWN_VALUES = {
    "CONFIG_KEY_DURABILITY": "__pregel_durability",
    "CONFIG_KEY_READ": "__pregel_read",
    "CONFIG_KEY_CHECKPOINTER": "__pregel_checkpointer",
    "CONFIG_KEY_CHECKPOINT_MAP": "checkpoint_map",
    "NS_SEP": "|",
}


def test_each_key_is_langgraphs_own_and_its_fallback_is_the_same_value():
    internals = importlib.import_module(PRIVATE)
    for name, value in KNOWN_VALUES.items():
        assert getattr(compat, name) == getattr(internals, name) == value, name
    assert sorted(compat.__all__) == sorted(
        [
            *KNOWN_VALUES,
            "DELTA_SNAPSHOT",
            "SQLITE_DELTA",
            "checkpoint_read",
            "effective_config",
            "graph_namespace",
            "read_channels",
            "read_fresh",
            "route_edits",
            "unsaved",
        ]
    )
    assert compat.SQLITE_DELTA is not None  # the Team's saver reads a thread's writes in one scan
    assert compat.DELTA_SNAPSHOT is not None  # and stores a snapshot of histories as batches


def test_a_release_without_the_private_names_falls_back_to_the_known_keys(monkeypatch):
    # A langgraph that moved its constants: importing a name from the module fails.
    monkeypatch.setitem(sys.modules, PRIVATE, types.ModuleType(PRIVATE))
    try:
        reloaded = importlib.reload(compat)
        assert {name: getattr(reloaded, name) for name in KNOWN_VALUES} == KNOWN_VALUES
    finally:
        monkeypatch.undo()
        importlib.reload(compat)
    assert compat.CONFIG_KEY_READ == importlib.import_module(PRIVATE).CONFIG_KEY_READ


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [f"{path.relative_to(ROOT)}: {m}" for m in modules if m.startswith("langgraph") and "._" in m]
    return found


def test_only_compat_imports_private_langgraph_modules():
    offenders = [
        line
        for path in sorted((ROOT / "teamgraph").rglob("*.py"))
        if path.name != "compat.py"
        for line in _private_imports(path)
    ]
    assert offenders == [], "import LangGraph internals through teamgraph.compat"


def test_langgraph_is_pinned_below_its_next_minor_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (spec,) = [Requirement(d) for d in project["dependencies"] if Requirement(d).name == "langgraph"]
    uppers = [Version(s.version) for s in spec.specifier if s.operator == "<"]
    assert uppers == [Version("1.3")]
    installed = Version(importlib.metadata.version("langgraph"))
    assert installed in spec.specifier, f"the installed langgraph {installed} is outside {spec.specifier}"


class _State(TypedDict):
    items: list[str]
    seen: Annotated[list[str], operator.add]


def test_a_node_started_by_send_reads_the_graph_channels_through_the_key():
    # What nodes/role_graph.py relies on: the payload stays small, the state is read on demand.
    def fan_out(state: _State) -> list[Send]:
        return [Send("worker", {"item": item}) for item in state["items"]]

    def worker(payload: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        state = compat.read_channels(config, ["items"])
        return {"seen": [f"{payload['item']}/{len(state['items'])}"]}

    builder = StateGraph(_State)
    builder.add_node("worker", worker)
    builder.add_conditional_edges(START, fan_out, ["worker"])
    builder.add_edge("worker", END)
    result = builder.compile().invoke({"items": ["a", "b"], "seen": []})
    assert sorted(result["seen"]) == ["a/2", "b/2"]


def _checkpoints_saved(durability: str) -> int:
    builder = StateGraph(_State)
    builder.add_node("one", lambda state: {"seen": ["1"]})
    builder.add_node("two", lambda state: {"seen": ["2"]})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    graph = builder.compile(checkpointer=InMemorySaver())
    graph = graph.with_config(configurable={compat.CONFIG_KEY_DURABILITY: durability})
    config: RunnableConfig = {"configurable": {"thread_id": durability}}
    graph.invoke({"items": [], "seen": []}, config)
    return len(list(graph.get_state_history(config)))


def test_the_durability_key_sets_the_graphs_default_durability():
    # graph/build.py sets "sync" (each step saved before the next); "exit" saves only at the end.
    assert _checkpoints_saved("sync") == 4  # input, START, one, two
    assert _checkpoints_saved("exit") == 1


def test_a_node_routing_by_command_gets_a_branch_that_routes_only_edits():
    # What graph/build.py relies on: update_state as a Command-routing node re-runs its
    # writers (the branch among them), never the node; a normal run reads nothing to route.
    reads: list[str] = []

    def loop(state: _State) -> Command:
        return Command(update={"seen": ["x"]}, goto="loop" if len(state["seen"]) < 2 else END)

    def path(update: Any, config: RunnableConfig) -> str | list[str]:
        if isinstance(update, Command) and update.goto:
            return []
        reads.append("items")
        return "loop" if compat.read_fresh(config, "items", []) else END

    builder = StateGraph(_State)
    builder.add_node("loop", loop, destinations=("loop", END))
    builder.add_edge(START, "loop")
    graph = builder.compile(checkpointer=InMemorySaver())
    compat.route_edits(graph, "loop", path)
    drawn = {(e.source, e.target) for e in graph.get_graph().edges}
    assert drawn == {("__start__", "loop"), ("loop", "loop"), ("loop", END)}
    config: RunnableConfig = {"configurable": {"thread_id": "edits"}}
    graph.invoke({"items": [], "seen": []}, config)
    assert graph.get_state(config).values["seen"] == ["x", "x", "x"] and reads == []
    graph.update_state(config, {"items": ["again"]})  # NOTE: as "loop", the last writer
    assert reads == ["items"] and graph.get_state(config).next == ("loop",)


def test_a_subgraph_run_unsaved_inside_a_sync_task_writes_no_checkpoint_and_is_drawn():
    # What nodes/role_graph.py relies on: the role subgraph inherits the saver (xray draws it)
    # and runs lent none, under the parent's "sync" durability.
    inner = StateGraph(_State)
    inner.add_node("step", lambda state: {"seen": ["inner"]})
    inner.add_edge(START, "step")
    sub = inner.compile(name="role")

    def role(state: _State, config: RunnableConfig) -> dict[str, Any]:
        return {"seen": sub.invoke({"items": [], "seen": []}, compat.unsaved(config))["seen"]}

    outer = StateGraph(_State)
    outer.add_node("role", role)
    outer.add_edge(START, "role")
    saver = InMemorySaver()
    graph = outer.compile(checkpointer=saver).with_config(configurable={compat.CONFIG_KEY_DURABILITY: "sync"})
    config: RunnableConfig = {"configurable": {"thread_id": "unsaved"}}
    assert graph.invoke({"items": [], "seen": []}, config)["seen"] == ["inner"]
    namespaces = {c.config["configurable"]["checkpoint_ns"] for c in saver.list(None)}
    assert namespaces == {""}  # NOTE: no checkpoint of the subgraph's own supersteps
    assert "role:step" in graph.get_graph(xray=True).nodes
