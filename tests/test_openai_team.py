"""A team on the real ChatOpenAI client, over HTTP, against a local OpenAI-protocol server."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessageChunk

from teamgraph import Team
from teamgraph.messaging.results import error_of
from teamgraph.tools import errors
from tests.invariants import assert_team_invariants

LEADER = "Team Leader"


def agent_of(body: dict) -> str:
    """Which agent sent a request: members' system prompts say "You are <name>."."""
    system = body["messages"][0]["content"]
    match = re.search(r"# You are (.+?)\.\n", system)
    return match.group(1) if match else LEADER


def turns(body: dict) -> int:
    """How many assistant messages the agent already has (its turn index)."""
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


@pytest.fixture
def openai_team(openai_server, monkeypatch, tmp_path):
    """Start a server with a per-agent script and a Team that talks to it."""

    def start(scripts: dict[str, list], *, errors: list | None = None):
        pending_errors = list(errors or [])

        def answer(body: dict):
            if pending_errors:
                return pending_errors.pop(0)
            return scripts[agent_of(body)][turns(body)]

        server = openai_server(answer)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        team = Team(model="openai:gpt-test", home=tmp_path)
        return server, team, team.compile()

    return start


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
        {"content": None, "tool_calls": [{"name": "write_file", "arguments": '{"path": "notes.md", "content": '}]},
        {
            "content": None,
            "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "cookies"}}],
        },
        "Session cookies: simpler revocation. Notes in notes.md.",
    ],
}


def test_tool_calls_round_trip_over_http(openai_team):
    server, team, graph = openai_team(DELEGATION)
    config = {"configurable": {"thread_id": "http"}}

    out = graph.invoke({"messages": [("user", "Cookies or JWT?")]}, config)

    assert out["messages"][-1].content == "Researcher_1 recommends session cookies."
    assert (team.runtime.project_folder(config) / "notes.md").read_text() == "cookies"
    # The client sent our tools and the model name; every request is the OpenAI protocol.
    first = server.requests[0]
    assert first["model"] == "gpt-test"
    assert "create_sub_agent" in {t["function"]["name"] for t in first["tools"]}
    # The malformed arguments came back to the member as an error it could fix.
    tool_results = [m for m in team.history(config, "Researcher_1") if m.type == "tool"]
    assert error_of(tool_results[0]) == errors.INVALID_CALL
    assert tool_results[1].content.startswith("Wrote 7 characters")


def test_streamed_tokens_are_tagged_with_the_agent(openai_team):
    server, team, graph = openai_team(DELEGATION)
    config = {"configurable": {"thread_id": "stream"}}

    tokens: dict[str, str] = {}
    # NOTE: model calls stream as the router node's (root namespace), tagged with their agent.
    stream = graph.stream({"messages": [("user", "Cookies or JWT?")]}, config, stream_mode="messages", subgraphs=True)
    for _namespace, (chunk, meta) in stream:
        if isinstance(chunk, AIMessageChunk) and chunk.content:
            tokens[meta["teamgraph_agent"]] = tokens.get(meta["teamgraph_agent"], "") + chunk.content

    assert any(r.get("stream") for r in server.requests)
    assert tokens[LEADER] == "Researcher_1 recommends session cookies."
    assert tokens["Researcher_1"] == "Session cookies: simpler revocation. Notes in notes.md."


def test_provider_errors_are_retried(openai_team):
    provider_errors = [
        {"error": {"status": 500, "message": "upstream hiccup", "retry_after": 0.01}},
        {"error": {"status": 429, "message": "slow down", "retry_after": 0.01}},
    ]
    server, team, graph = openai_team(DELEGATION, errors=provider_errors)
    config = {"configurable": {"thread_id": "retry"}}

    out = graph.invoke({"messages": [("user", "Cookies or JWT?")]}, config)

    assert out["messages"][-1].content == "Researcher_1 recommends session cookies."
    assert len(server.requests) == 2 + 6  # two failed attempts, then the 6 scripted answers


def test_a_member_whose_provider_keeps_failing_is_reported_not_fatal(openai_team, monkeypatch):
    import teamgraph.nodes.role_graph as role_graph

    # NOTE: every attempt is still made; only LangGraph's back-off between them (seconds) is not waited.
    monkeypatch.setattr(role_graph, "MODEL_RETRY", role_graph.MODEL_RETRY._replace(initial_interval=0.0, jitter=False))
    scripts = {
        LEADER: [
            {
                "content": None,
                "tool_calls": [
                    {"name": "create_sub_agent", "arguments": {"role_id": "researcher", "task": "Look it up."}}
                ],
            },
            "",
            "Researcher_1 failed; I will answer myself: cookies.",
        ],
        "Researcher_1": [{"error": {"status": 400, "message": "context too long"}}],
    }
    server, team, graph = openai_team(scripts)
    config = {"configurable": {"thread_id": "fail"}}

    out = graph.invoke({"messages": [("user", "Cookies or JWT?")]}, config)

    assert out["agents"]["Researcher_1"]["status"] == "failed"
    notices = [m.content for m in team.history(config, LEADER) if m.type == "human"]
    assert any("Researcher_1 failed:" in n and "context too long" in n for n in notices)
    assert out["messages"][-1].content == "Researcher_1 failed; I will answer myself: cookies."


# --- nothing a model sends can kill a thread ------------------------------------------------

NOT_OBJECTS = ['"{\\"role_id\\": \\"researcher\\"}"', '["researcher"]', "42", "true"]


def _calls(name: str, arguments) -> dict:
    return {"content": None, "tool_calls": [{"name": name, "arguments": arguments}]}


@pytest.mark.parametrize("arguments", NOT_OBJECTS, ids=["double-encoded", "list", "number", "boolean"])
def test_arguments_that_are_json_but_not_an_object_come_back_as_an_error_to_the_leader(openai_team, arguments):
    scripts = {
        LEADER: [
            _calls("create_sub_agent", arguments),
            _calls("create_sub_agent", {"role_id": "researcher", "task": "Look it up."}),
            "",
            "Done.",
        ],
        "Researcher_1": ["Cookies."],
    }
    server, team, graph = openai_team(scripts)
    config = {"configurable": {"thread_id": "bad-leader"}}

    out = graph.invoke({"messages": [("user", "Cookies or JWT?")]}, config)

    first = next(m for m in team.history(config, LEADER) if m.type == "tool")
    assert (first.status, error_of(first)) == ("error", errors.INVALID_CALL)
    assert "role_id" in first.content  # NOTE: it names the expected arguments
    assert out["agents"]["Researcher_1"]["status"] == "idle"
    assert out["messages"][-1].content == "Done."


@pytest.mark.parametrize("arguments", NOT_OBJECTS[:2], ids=["double-encoded", "list"])
def test_a_member_sending_non_object_arguments_is_told_and_goes_on(openai_team, arguments):
    scripts = {
        LEADER: [_calls("create_sub_agent", {"role_id": "researcher", "task": "Write notes."}), "", "Done."],
        "Researcher_1": [
            _calls("write_file", arguments),
            _calls("write_file", {"path": "notes.md", "content": "ok"}),
            "Notes written.",
        ],
    }
    server, team, graph = openai_team(scripts)
    config = {"configurable": {"thread_id": "bad-member"}}

    out = graph.invoke({"messages": [("user", "Notes please")]}, config)

    results = [m for m in team.history(config, "Researcher_1") if m.type == "tool"]
    assert (results[0].status, error_of(results[0])) == ("error", errors.INVALID_CALL)
    assert out["agents"]["Researcher_1"]["status"] == "idle"
    assert (team.runtime.project_folder(config) / "notes.md").read_text() == "ok"


@pytest.mark.parametrize("seconds", ["1e12", "NaN", "1e400", "-5"])
def test_absurd_time_outs_are_refused_and_the_thread_goes_on(openai_team, seconds):
    send = '{"sessionKey": "Researcher_1", "message": "Status?", "timeoutSeconds": ' + seconds + "}"
    scripts = {
        LEADER: [
            _calls("create_sub_agent", {"role_id": "researcher"}),
            _calls("sessions_send", send),
            "Done.",
            "Done again.",
        ],
        "Researcher_1": [],
    }
    server, team, graph = openai_team(scripts)
    config = {"configurable": {"thread_id": "timeouts"}}

    out = graph.invoke({"messages": [("user", "Go")]}, config)

    result = [m for m in team.history(config, LEADER) if m.type == "tool"][-1]
    assert (result.status, error_of(result)) == ("error", errors.BAD_ARGUMENT) and "timeoutSeconds" in result.content
    assert out["messages"][-1].content == "Done."
    graph.invoke({"messages": [("user", "Again")]}, config)  # the thread can still continue


def test_a_custom_role_with_a_model_the_team_cannot_build_is_refused_and_the_home_stays_usable(openai_team, tmp_path):
    role = {
        "id": "analyst",
        "name": "Analyst",
        "description": "Analyses.",
        "prompt": "Analyse.",
        "model": "nosuchprovider:x",
    }
    scripts = {LEADER: [_calls("create_custom_agent", role), "Done.", "Done again."]}
    server, team, graph = openai_team(scripts)
    config = {"configurable": {"thread_id": "custom"}}

    out = graph.invoke({"messages": [("user", "Make a role")]}, config)

    result = next(m for m in team.history(config, LEADER) if m.type == "tool")
    assert (result.status, error_of(result)) == ("error", errors.BAD_ARGUMENT) and "nosuchprovider:x" in result.content
    assert out["messages"][-1].content == "Done."
    assert not (tmp_path / "roles" / "analyst.md").exists()
    Team(model="openai:gpt-test", home=tmp_path).compile()  # a new process could open the home


def test_members_working_in_parallel_over_http_keep_every_invariant(openai_team):
    """Three members, eight calls each, on the real client under the completions scheduler."""
    steps = 8

    def member(name: str) -> list:
        work = [
            {
                "content": None,
                "tool_calls": [{"name": "write_file", "arguments": {"path": f"{name}-{n}.md", "content": "x"}}],
            }
            for n in range(steps - 1)
        ]
        return [*work, f"{name} is done."]

    create = [
        {"name": "create_sub_agent", "arguments": {"role_id": "researcher", "task": f"Part {i}."}} for i in range(3)
    ]
    scripts = {
        LEADER: [{"content": None, "tool_calls": create}, *[""] * 6],
        **{f"Researcher_{i}": member(f"Researcher_{i}") for i in (1, 2, 3)},
    }
    server, team, graph = openai_team(scripts)
    config = {"configurable": {"thread_id": "parallel-http"}}
    graph.invoke({"messages": [("user", "Split the work.")]}, config)

    values = graph.get_state(config).values
    assert team.runtime.scheduling() == "completions"
    assert_team_invariants(values)
    assert values["team"].get("in_flight", {}) == {}
    assert {n: a["status"] for n, a in values["agents"].items() if n != LEADER} == dict.fromkeys(
        ("Researcher_1", "Researcher_2", "Researcher_3"), "idle"
    )
    assert len([r for r in server.requests if agent_of(r) != LEADER]) == 3 * steps
