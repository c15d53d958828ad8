"""The team graph served by `langgraph dev`, driven as Studio drives it (langgraph_sdk).

One server per distinct configuration per module: the `langgraph_dev` fixture
starts `langgraph dev` on a free port and caches it by its settings, so every
test asking for the same settings shares one server. To test another team
configuration (e.g. a human-in-the-loop policy), ask for it:

    def test_pause_for_a_person(langgraph_dev):
        server = langgraph_dev(policy={"ask": "human"})
        client = get_sync_client(url=server.url)
        ...

Every server's process group is killed when the module ends.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

langgraph_sdk = pytest.importorskip("langgraph_sdk")
from langgraph_sdk import get_sync_client  # noqa: E402

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "langgraph.json"
DEMO = REPO / "teamgraph" / "demo" / "demo.yaml"
GRAPH_ID = "teamgraph"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 10
TASK = "Build a login feature"
MEMBERS = {"Team Leader", "UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1"}

# Keys that would make the server talk to LangSmith (tracing, license, metadata).
_ONLINE_KEYS = (
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGSMITH_CONTROL_PLANE_API_KEY",
    "LANGGRAPH_CLOUD_LICENSE_KEY",
    "LANGSMITH_ENDPOINT",
    "LANGCHAIN_ENDPOINT",
)
_OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "PYTHONUNBUFFERED": "1",
}


@dataclass
class DevServer:
    """A running `langgraph dev`."""

    url: str
    process: subprocess.Popen
    workdir: Path
    home: Path
    log: Path

    def log_tail(self, lines: int = 60) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_config(workdir: Path) -> Path:
    """The repository's langgraph.json with its paths made absolute.

    NOTE: `langgraph dev` resolves graph paths against its working directory and
    keeps its in-memory state under `./.langgraph_api/`. Running it from a
    temporary folder keeps that state out of the repository (and keeps runs of
    this test from seeing each other's threads); the config is otherwise the
    repository's own.
    """
    config = json.loads(CONFIG.read_text(encoding="utf-8"))

    def absolute(spec: str) -> str:
        path, _, attr = spec.partition(":")
        return f"{(REPO / path).resolve()}:{attr}" if attr else str((REPO / path).resolve())

    config["graphs"] = {gid: absolute(spec) for gid, spec in config["graphs"].items()}
    config["dependencies"] = [absolute(d) if d.startswith(".") else d for d in config.get("dependencies", [])]
    path = workdir / "langgraph.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def wait_until_ok(
    url: str, process: subprocess.Popen, *, name: str, log_tail: Callable[[], str], timeout: float
) -> None:
    """Wait until the server at ``url`` answers ``/ok``; a clear error when it exits or times out first."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with code {process.returncode} before it was ready:\n{log_tail()}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} not ready after {timeout:g}s:\n{log_tail()}")
        time.sleep(0.25)


def _stop(server: DevServer) -> None:
    if server.process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
        try:
            os.killpg(server.process.pid, sig)
        except ProcessLookupError:
            return
        try:
            server.process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _start(workdir: Path, env_overrides: dict[str, str]) -> DevServer:
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in _ONLINE_KEYS}
    env.update(_OFFLINE_ENV)
    env.update({"TEAMGRAPH_MODEL": f"scripted:{DEMO}", "TEAMGRAPH_HOME": str(home)})
    env.update(env_overrides)
    log = workdir / "server.log"
    cli = [sys.executable, "-m", "langgraph_cli"]  # the `langgraph` command
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                *cli,
                "dev",
                "--no-browser",
                "--no-reload",
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--config",
                str(_server_config(workdir)),
            ],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as one
        )
    server = DevServer(f"http://127.0.0.1:{port}", process, workdir, home, log)
    try:
        wait_until_ok(server.url, process, name="langgraph dev", log_tail=server.log_tail, timeout=START_TIMEOUT_S)
        return server
    except BaseException:
        _stop(server)
        raise


@pytest.fixture(scope="module")
def langgraph_dev(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., DevServer]]:
    """`langgraph_dev(policy=None, **env) -> DevServer`, one server per settings.

    Args (of the returned function):
        policy: Policy fields, passed as ``TEAMGRAPH_POLICY`` JSON.
        **env: Other environment variables for the server (override the
            defaults: the demo script as the model, a fresh home folder).
    """
    servers: dict[str, DevServer] = {}

    def get(policy: dict[str, Any] | None = None, **env: str) -> DevServer:
        overrides = dict(env)
        if policy is not None:
            overrides["TEAMGRAPH_POLICY"] = json.dumps(policy, sort_keys=True)
        key = json.dumps(overrides, sort_keys=True)
        if key not in servers:
            try:
                servers[key] = _start(tmp_path_factory.mktemp("langgraph_dev"), overrides)
            except RuntimeError as error:
                if "address already in use" not in str(error).lower():
                    raise
                # NOTE: the free port was taken between choosing it and binding it.
                servers[key] = _start(tmp_path_factory.mktemp("langgraph_dev"), overrides)
        server = servers[key]
        if server.process.poll() is not None:
            pytest.fail(f"langgraph dev died (code {server.process.returncode}):\n{server.log_tail()}")
        return server

    try:
        yield get
    finally:
        for server in servers.values():
            _stop(server)


@pytest.fixture(scope="module")
def studio_server(langgraph_dev: Callable[..., DevServer]) -> DevServer:
    """The demo team with the default policy."""
    return langgraph_dev()


@pytest.fixture(scope="module")
def demo_run(studio_server: DevServer) -> dict[str, Any]:
    """One demo run to the end on a new thread, streamed as Studio streams it: its `values` chunks,
    its output (the last chunk, or ``{"__error__": ...}``) and its final state."""
    client = get_sync_client(url=studio_server.url)
    thread = client.threads.create()
    chunks, output = [], None
    for part in client.runs.stream(
        thread["thread_id"],
        GRAPH_ID,
        input={"messages": [{"role": "user", "content": TASK}]},
        stream_mode="values",
    ):
        if part.event == "values":
            chunks.append(part.data)
            output = part.data
        elif part.event == "error":
            output = {"__error__": part.data}
    state = client.threads.get_state(thread["thread_id"])
    return {"thread": thread, "output": output, "chunks": chunks, "state": state}


def _assistant_id(client: Any) -> str:
    assistants = client.assistants.search(graph_id=GRAPH_ID)
    assert assistants, "langgraph dev registered no assistant for the teamgraph graph"
    return assistants[0]["assistant_id"]


def test_langgraph_json_is_valid() -> None:
    from langgraph_cli.config import validate_config_file

    config = validate_config_file(CONFIG)
    assert config["graphs"][GRAPH_ID] == "./teamgraph/studio.py:make_graph"
    assert config["env"] == ".env"
    example = (REPO / ".env.example").read_text(encoding="utf-8")
    assert "TEAMGRAPH_MODEL=" in example and "TEAMGRAPH_HOME=" in example
    ignored = (REPO / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".venv/", ".teamgraph/", ".env", ".git/"} <= set(ignored)


def test_policy_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Importing teamgraph.studio builds the team from the environment.
    monkeypatch.setenv("TEAMGRAPH_MODEL", f"scripted:{DEMO}")
    monkeypatch.setenv("TEAMGRAPH_HOME", str(tmp_path))
    monkeypatch.delenv("TEAMGRAPH_POLICY", raising=False)
    from teamgraph.policy import Policy
    from teamgraph.studio import policy_from_env

    assert policy_from_env({}) == Policy()
    assert policy_from_env({"TEAMGRAPH_POLICY": '{"ask": "human", "max_parallel": 2}'}) == Policy(
        ask="human", max_parallel=2
    )
    with pytest.raises(ValueError, match="TEAMGRAPH_POLICY must be a JSON object of Policy fields"):
        policy_from_env({"TEAMGRAPH_POLICY": '{"asks": "human"}'})


def test_run_to_the_end(studio_server: DevServer, demo_run: dict[str, Any]) -> None:
    output, state = demo_run["output"], demo_run["state"]
    assert not (isinstance(output, dict) and "__error__" in output), (
        f"run failed: {output}\n--- server log ---\n{studio_server.log_tail()}"
    )
    values = state["values"]
    assert MEMBERS <= set(values["agents"]), values["agents"].keys()
    for name in MEMBERS:
        history = values["histories"][name]
        assert any(m["type"] == "ai" for m in history), f"{name} has no AI message: {history}"
    assert values["histories"]["UI Operator_1"][0]["type"] == "human"  # its task envelope
    final = values["messages"][-1]
    assert final["type"] == "ai"
    assert final["content"].startswith("The login feature is built.")
    assert values["messages"][0]["content"] == TASK
    assert state["next"] == []
    # The project files the members wrote went to TEAMGRAPH_HOME.
    written = {p.relative_to(studio_server.home).as_posix() for p in studio_server.home.rglob("*.*")}
    folder = f"project/{demo_run['thread']['thread_id']}"  # the thread's project folder
    assert {f"{folder}/web/login.html", f"{folder}/web/signup.html", f"{folder}/api/auth.py"} <= written


def test_a_values_stream_carries_the_output_schema_not_the_histories(demo_run: dict[str, Any]) -> None:
    """Studio's `values` chunks are the conversation, the roster and the team book (one per superstep);
    histories and requests are in the thread's state."""
    chunks, values = demo_run["chunks"], demo_run["state"]["values"]
    assert len(chunks) > 5
    assert all(set(chunk) <= {"messages", "agents", "team"} for chunk in chunks), [sorted(c) for c in chunks]
    assert chunks[-1]["agents"] == values["agents"]
    said = [[(m["type"], m["id"], m["content"]) for m in ms] for ms in (chunks[-1]["messages"], values["messages"])]
    assert said[0] == said[1]
    assert MEMBERS <= set(values["histories"])


def test_graph_shows_the_team(studio_server: DevServer) -> None:
    """Issue 29: the API server draws the leader, a node per role, the member node and the gate,
    and with ``xray`` each role subgraph's model, tools and effects."""
    client = get_sync_client(url=studio_server.url)
    assistant_id = _assistant_id(client)
    drawn = client.assistants.get_graph(assistant_id)
    nodes = {n["id"] for n in drawn["nodes"]}
    assert {"__start__", "router", "leader", "ui-operator", "full-stack-engineer", "member", "human"} <= nodes
    edges = {(e["source"], e["target"]) for e in drawn["edges"]}
    assert {("router", "human"), ("router", "leader"), ("leader", "router"), ("human", "router")} <= edges
    inner = {n["id"] for n in client.assistants.get_graph(assistant_id, xray=True)["nodes"]}
    assert {"ui-operator:model", "ui-operator:tools", "ui-operator:effects"} <= inner


def test_stream_tags_tokens_with_the_agent(studio_server: DevServer) -> None:
    """What Studio shows while a run goes: every member's tokens, named."""
    client = get_sync_client(url=studio_server.url)
    thread = client.threads.create()
    agents: set[str] = set()
    events = 0
    for part in client.runs.stream(
        thread["thread_id"],
        GRAPH_ID,
        input={"messages": [{"role": "user", "content": TASK}]},
        stream_mode=["messages-tuple", "updates"],
        stream_subgraphs=True,
    ):
        events += 1
        assert part.event != "error", f"{part.data}\n--- server log ---\n{studio_server.log_tail()}"
        if part.event.startswith("messages"):
            chunk, metadata = part.data
            if chunk.get("type") == "AIMessageChunk":
                assert metadata.get("teamgraph_agent"), metadata
                agents.add(metadata["teamgraph_agent"])
    assert agents == MEMBERS, (events, agents)


APPROVAL_SCRIPT = DEMO.parent / "approval.yaml"


def test_a_pause_for_a_person_is_answered_through_the_api(langgraph_dev: Callable[..., DevServer]) -> None:
    """The run pauses for a plan approval; the thread state shows the interrupt; a resume finishes it.

    The first run names its project; the resumes send none (as Studio's do) and log to it all the same.
    """
    server = langgraph_dev(
        policy={"plan": "human", "require_plan": True}, TEAMGRAPH_MODEL=f"scripted:{APPROVAL_SCRIPT}"
    )
    client = get_sync_client(url=server.url)
    thread = client.threads.create()
    client.runs.wait(
        thread["thread_id"],
        GRAPH_ID,
        input={"messages": [{"role": "user", "content": "Cookies or JWT for our login?"}]},
        config={"configurable": {"project_name": "login-study"}},
        raise_error=False,
    )
    state = client.threads.get_state(thread["thread_id"])
    interrupts = [i for task in state["tasks"] for i in task.get("interrupts", [])]
    assert len(interrupts) == 1, state["tasks"]
    request = interrupts[0]["value"]["requests"]["plan_1"]
    assert request["type"] == "plan" and request["steps"][0]["role_id"] == "researcher"
    assert state["values"]["requests"]["plan_1"]["status"] == "pending"

    # A refused value changes nothing: the run pauses again and says why.
    client.runs.wait(
        thread["thread_id"], GRAPH_ID, command={"resume": {"plan_9": {"approve": True}}}, raise_error=False
    )
    state = client.threads.get_state(thread["thread_id"])
    value = [i for task in state["tasks"] for i in task.get("interrupts", [])][0]["value"]
    assert "unknown request id 'plan_9'" in value["error"]
    assert state["values"]["requests"]["plan_1"]["status"] == "pending"

    # An edit in Studio's state editor keeps the run paused at the gate (the router routes by Command).
    client.threads.update_state(thread["thread_id"], {"messages": []})
    assert client.threads.get_state(thread["thread_id"])["next"] == ["human"]

    client.runs.wait(
        thread["thread_id"],
        GRAPH_ID,
        command={"resume": {"plan_1": {"approve": True, "feedback": "Go ahead."}}},
        raise_error=False,
    )
    state = client.threads.get_state(thread["thread_id"])
    assert not [i for task in state["tasks"] for i in task.get("interrupts", [])]
    values = state["values"]
    assert values["requests"]["plan_1"]["status"] == "approved"
    assert values["agents"]["Researcher_1"]["status"] == "idle"
    assert values["messages"][-1]["content"].startswith("Recommendation (from Researcher_1)")
    assert values["team"]["project"] == "login-study"
    assert sorted(p.name for p in (server.home / "logs").iterdir()) == ["login-study"]


# --- per-assistant configuration, schemas, no model -----------------------------


@pytest.fixture(scope="module")
def unconfigured_server(langgraph_dev: Callable[..., DevServer]) -> DevServer:
    """A server whose environment names no model: assistants must bring their own."""
    return langgraph_dev(TEAMGRAPH_MODEL="")


def _interrupts(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for task in state["tasks"] for i in task.get("interrupts", [])]


def test_schemas_are_real_through_the_api(unconfigured_server: DevServer) -> None:
    client = get_sync_client(url=unconfigured_server.url)
    schemas = client.assistants.get_schemas(_assistant_id(client))

    assert schemas["input_schema"] is not None and "messages" in schemas["input_schema"]["properties"]
    assert schemas["output_schema"] is not None
    # NOTE: the output (a `values` chunk) is the conversation, the roster and the team book; the
    # state (what Studio's state view and `get_state` read) keeps every history and request.
    assert set(schemas["output_schema"]["properties"]) == {"messages", "agents", "team"}
    assert {"messages", "agents", "histories", "requests", "deliveries"} <= set(schemas["state_schema"]["properties"])
    for kind in ("config_schema", "context_schema"):
        assert {"model", "policy", "home"} <= set(schemas[kind]["properties"]), schemas[kind]
    assert "typing_extensions.TypedDict" not in unconfigured_server.log.read_text(encoding="utf-8")


def test_without_a_model_the_graph_loads_and_a_run_fails_in_one_line(unconfigured_server: DevServer) -> None:
    client = get_sync_client(url=unconfigured_server.url)
    thread = client.threads.create()

    output = client.runs.wait(
        thread["thread_id"], GRAPH_ID, input={"messages": [{"role": "user", "content": TASK}]}, raise_error=False
    )

    assert isinstance(output, dict) and "__error__" in output, output
    error = output["__error__"]
    assert error["error"] == "ModelNotConfiguredError", error
    assert "\n" not in error["message"].strip() and "TEAMGRAPH_MODEL" in error["message"], error


def test_two_assistants_with_different_policies_both_run(unconfigured_server: DevServer, tmp_path: Path) -> None:
    client = get_sync_client(url=unconfigured_server.url)
    model = f"scripted:{APPROVAL_SCRIPT}"
    careful = client.assistants.create(
        GRAPH_ID,
        name="careful",
        config={
            "configurable": {
                "model": model,
                "policy": {"plan": "human", "require_plan": True},
                "home": str(tmp_path / "careful"),
            }
        },
    )
    trusting = client.assistants.create(
        GRAPH_ID,
        name="trusting",
        config={
            "configurable": {
                "model": model,
                "policy": {"plan": "leader", "require_plan": True},
                "home": str(tmp_path / "trusting"),
            }
        },
    )
    ask = {"messages": [{"role": "user", "content": "Cookies or JWT for our login?"}]}
    states = {}
    for assistant in (careful, trusting):
        thread = client.threads.create()
        output = client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=ask, raise_error=False)
        assert not (isinstance(output, dict) and "__error__" in output), (output, unconfigured_server.log_tail())
        states[assistant["name"]] = client.threads.get_state(thread["thread_id"])

    # The careful assistant pauses for a person on the plan; the trusting one's leader decides.
    careful_state, trusting_state = states["careful"], states["trusting"]
    assert [set(i["value"]["requests"]) for i in _interrupts(careful_state)] == [{"plan_1"}]
    assert careful_state["values"]["requests"]["plan_1"]["status"] == "pending"
    assert not _interrupts(trusting_state)
    assert trusting_state["values"]["requests"]["plan_1"]["status"] == "approved"
    assert trusting_state["values"]["agents"]["Researcher_1"]["status"] == "idle"
    assert trusting_state["values"]["messages"][-1]["content"].startswith("Recommendation (from Researcher_1)")


def test_a_run_context_sets_the_model(unconfigured_server: DevServer) -> None:
    client = get_sync_client(url=unconfigured_server.url)
    thread = client.threads.create()

    output = client.runs.wait(
        thread["thread_id"],
        GRAPH_ID,
        input={"messages": [{"role": "user", "content": TASK}]},
        context={"model": f"scripted:{DEMO}"},
        raise_error=False,
    )

    assert not (isinstance(output, dict) and "__error__" in output), (output, unconfigured_server.log_tail())
    values = client.threads.get_state(thread["thread_id"])["values"]
    assert MEMBERS <= set(values["agents"])
    assert values["messages"][-1]["content"].startswith("The login feature is built.")
