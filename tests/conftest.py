"""Shared pytest fixtures for the teamgraph test suite."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Make ``tests/openai_server.py`` importable whether or not ``tests`` is a package.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
from openai_server import Script, ScriptedOpenAIServer  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _shared_tool_call_schemas() -> Iterator[None]:
    """Tools that share a name, description and args schema share one ``tool_call_schema``.

    NOTE: langchain derives a tool's ``tool_call_schema`` (a new pydantic model) once per tool
    object, and every ``Team.compile()`` builds every role's tools anew: deriving them is half
    of a compile, and the suite compiles hundreds of teams. The derived model depends only on
    the key below, so the suite derives each once; a tool whose schema is not a class (a JSON
    schema, an MCP tool's) is derived as langchain does.
    """
    from langchain_core.tools import BaseTool

    derive = BaseTool.tool_call_schema.fget
    derived: dict[tuple, Any] = {}

    def shared(tool: BaseTool) -> Any:
        if not isinstance(tool.args_schema, type):
            return derive(tool)
        key = (type(tool), tool.name, tool.description, tool.args_schema)
        if key not in derived:
            derived[key] = derive(tool)
        return derived[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BaseTool, "tool_call_schema", property(shared))
        yield


@pytest.fixture(autouse=True)
def _cli_settings_restored() -> Iterator[None]:
    """The CLI's process-wide settings (``--db``, ``--debug``) as they were before the test.

    NOTE: ``CliRunner.invoke`` runs the app in this process, and the root callback keeps its
    options in ``teamgraph.cli.errors.settings`` until the next invocation: a ``--db`` one test
    gave would otherwise be the database of the next test's ``list_threads`` in that worker.
    """
    module = sys.modules.get("teamgraph.cli.errors")
    saved = dict(module.settings) if module is not None else None
    yield
    module = sys.modules.get("teamgraph.cli.errors")
    if module is not None:
        module.settings.clear()
        module.settings.update(saved if saved is not None else {"debug": False})


@pytest.fixture
def openai_server() -> Iterator[Callable[[Script], ScriptedOpenAIServer]]:
    """Factory for local OpenAI-compatible servers answering from a script.

    ``openai_server(script)`` returns a started :class:`ScriptedOpenAIServer`;
    every server created is stopped when the test ends::

        def test_x(openai_server):
            server = openai_server(["Hello!"])
            llm = ChatOpenAI(model="gpt-test", base_url=server.base_url, api_key="test")
    """
    servers: list[ScriptedOpenAIServer] = []

    def start(script: Script, **kwargs) -> ScriptedOpenAIServer:
        server = ScriptedOpenAIServer(script, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# --- team scenario fixtures (tests/test_team_*.py) ------------------------------

LEADER = "Team Leader"


class TeamRun:
    """One scripted team thread: the team, its compiled graph and the thread config."""

    def __init__(self, team, graph, config, *, model=None, script=None) -> None:
        self.team = team
        self.graph = graph
        self.config = config
        self._model = model
        self._script = script

    def _use_script(self) -> None:
        # A shared team's model plays the script of the run that uses it now.
        if self._model is not None:
            self._model.script = self._script

    def send(self, text: str, *, callbacks: list | None = None) -> dict:
        """A user message on this thread; returns ``graph.invoke``'s output."""
        self._use_script()
        config = {**self.config, "callbacks": callbacks} if callbacks else self.config
        return self.graph.invoke({"messages": [("user", text)]}, config)

    @property
    def values(self) -> dict:
        return self.graph.get_state(self.config).values

    def history(self, name: str) -> list:
        return self.team.history(self.config, name)

    def agents(self) -> dict:
        return self.team.agents(self.config)

    def status(self, name: str) -> str:
        return self.agents()[name]["status"]

    def requests(self) -> dict:
        return self.values.get("requests", {})

    def tool_results(self, name: str, tool: str | None = None) -> list:
        """The ToolMessages in ``name``'s history answering calls to ``tool`` (all if None)."""
        from langchain_core.messages import AIMessage, ToolMessage

        history = self.history(name)
        called = {c["id"]: c["name"] for m in history if isinstance(m, AIMessage) for c in m.tool_calls}
        called.update({c["id"]: c["name"] for m in history if isinstance(m, AIMessage) for c in m.invalid_tool_calls})
        return [
            m for m in history if isinstance(m, ToolMessage) and (tool is None or called.get(m.tool_call_id) == tool)
        ]

    def request(self, request_id: str) -> dict:
        return self.requests()[request_id]

    @staticmethod
    def interrupt_of(out: dict) -> dict | None:
        """The value of the one interrupt in ``graph.invoke``'s output, or None."""
        interrupts = out.get("__interrupt__") or []
        assert len(interrupts) <= 1, f"one interrupt at a time, got {interrupts}"
        return interrupts[0].value if interrupts else None

    def pause(self) -> dict | None:
        """The value of the thread's pending interrupt (None when the run is not paused)."""
        interrupts = self.graph.get_state(self.config).interrupts
        assert len(interrupts) <= 1, f"one interrupt at a time, got {interrupts}"
        return interrupts[0].value if interrupts else None

    def tool_texts(self, name: str, tool: str | None = None) -> list[str]:
        return [str(m.content) for m in self.tool_results(name, tool)]

    def ai_count(self, name: str) -> int:
        from langchain_core.messages import AIMessage

        return sum(isinstance(m, AIMessage) for m in self.history(name))

    def tool_result(self, name: str, tool: str, index: int = 0) -> str:
        results = self.tool_results(name, tool)
        assert len(results) > index, f"{name} has {len(results)} result(s) of {tool}: {results}"
        return str(results[index].content)

    def inbox_texts(self, name: str) -> list[str]:
        """The user-role messages (envelopes, notices, user input) in ``name``'s history."""
        from langchain_core.messages import HumanMessage

        return [str(m.content) for m in self.history(name) if isinstance(m, HumanMessage)]

    def notices(self, name: str, kind: str | None = None) -> list[str]:
        """The runtime's notices in ``name``'s history, of ``kind`` (``messaging/notices.py``) or all."""
        from langchain_core.messages import HumanMessage

        from teamgraph.messaging.envelopes import ENVELOPE_KEY

        wanted = f"notice:{kind}" if kind else "notice:"
        return [
            str(m.content)
            for m in self.history(name)
            if isinstance(m, HumanMessage) and str(m.additional_kwargs.get(ENVELOPE_KEY, "")).startswith(wanted)
        ]

    def user_replies(self) -> list[str]:
        """The Team Leader's replies in the user-facing conversation."""
        from langchain_core.messages import AIMessage

        return [str(m.content) for m in self.values.get("messages", []) if isinstance(m, AIMessage)]

    def supersteps(self, text: str) -> list[tuple[list[str], list[str]]]:
        """Run a user message with ``stream_mode="updates"``.

        Returns:
            One ``(scheduled, ran)`` pair per router pass: the agents whose steps
            the pass issued, and those of them whose steps finished and were taken
            back by the next pass (in lockstep: all of them).
        """
        steps: list[tuple[list[str], list[str]]] = []
        self._use_script()
        taken = {name: rec["steps"] for name, rec in self.values.get("agents", {}).items()}
        for update in self.graph.stream({"messages": [("user", text)]}, self.config, stream_mode="updates"):
            for node, value in update.items():
                if node != "router":
                    continue
                # NOTE: a router superstep first takes back the steps that finished (issued
                # by an earlier pass), then issues the next ones.
                changed = value.get("agents", {})
                ran = [name for name, rec in changed.items() if rec["steps"] > taken.get(name, 0)]
                taken.update({name: rec["steps"] for name, rec in changed.items()})
                if steps:
                    steps[-1][1].extend(ran)
                steps.append((list(value["team"]["scheduled"]), []))
        return steps


@pytest.fixture
def snapshot_every(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``snapshot_every(n, roster=m)``: DeltaChannel snapshots every ``n`` updates (the
    roster's every ``m``, default ``n``), in graphs compiled afterwards (the cadence is
    read when a graph is built); restored after the test."""
    import teamgraph.state

    def every(updates: int, *, roster: int | None = None) -> None:
        monkeypatch.setattr(teamgraph.state, "HISTORY_SNAPSHOT_FREQUENCY", updates)
        monkeypatch.setattr(teamgraph.state, "ROSTER_SNAPSHOT_FREQUENCY", roster or updates)

    return every


@pytest.fixture
def team_home(tmp_path: Path) -> Path:
    """The home folder of the team under test (SQLite file, roles, project files).

    A test that asks for it gets a team of its own in this folder (see make_team).
    """
    return tmp_path / "home"


_THREADS = itertools.count(1)
"""Thread numbers unique in the session (shared compiled teams share one SQLite file)."""


@pytest.fixture(scope="session")
def compiled_teams(tmp_path_factory):
    """Compiled teams shared across tests: ``compiled_teams(policy, roles_dir=None, clock=None)``.

    Compiling a team builds every role's tools and subgraph, far more than a
    scripted scenario costs, so tests that need no home of their own share one
    compiled team per (policy, roles_dir, clocked or not), each in a thread of its
    own; the caller swaps the ScriptedChatModel's script (``team.runtime.model``).

    Returns:
        ``(team, graph)``; with ``clock``, the team reads time from it from now on.
    """
    from teamgraph import ScriptedChatModel, Team

    cache: dict = {}

    def get(policy, *, roles_dir=None, clock=None):
        key = (policy.model_dump_json(), str(roles_dir), clock is not None)
        if key not in cache:
            team = Team(
                model=ScriptedChatModel({}),
                home=tmp_path_factory.mktemp("shared-home"),
                policy=policy,
                roles_dir=roles_dir,
                clock=clock,
            )
            cache[key] = (team, team.compile())
        team, graph = cache[key]
        if clock is not None:
            team.runtime.clock = clock
        return team, graph

    return get


@pytest.fixture
def make_team(request, compiled_teams):
    """Factory: ``make_team(script, policy=..., roles_dir=..., home=..., thread=...)`` -> TeamRun.

    ``script`` is a ScriptedChatModel script (a dict) or any chat model. A test
    that uses ``team_home``, a ``home`` or a model of its own gets a team of its
    own (in ``team_home`` unless ``home`` is given); others run in a fresh thread
    of a shared compiled team (one per policy and ``roles_dir``): a test that
    changes its team's runtime must ask for a team of its own. Nothing runs until
    ``run.send(...)``.
    """
    from teamgraph import Policy, ScriptedChatModel, Team

    own_home = "team_home" in request.fixturenames
    threads = itertools.count(1)

    def build(script, *, policy=None, roles_dir=None, thread: str | None = None, home=None) -> TeamRun:
        policy = policy or Policy()
        thread = thread or f"{request.node.name}-{next(threads)}"
        config = {"configurable": {"thread_id": thread}}
        if own_home or home is not None or not isinstance(script, dict):
            model = ScriptedChatModel(script) if isinstance(script, dict) else script
            team = Team(
                model=model,
                home=home or request.getfixturevalue("team_home"),
                policy=policy,
                roles_dir=roles_dir,
            )
            return TeamRun(team, team.compile(), config)
        team, graph = compiled_teams(policy, roles_dir=roles_dir)
        return TeamRun(team, graph, config, model=team.runtime.model, script=script)

    return build


@pytest.fixture
def run_team(make_team):
    """``run_team(script, user="...", **make_team_kwargs)``: build a team and send one message."""

    def run(script, user: str = "Please do the work.", **kwargs) -> TeamRun:
        team_run = make_team(script, **kwargs)
        team_run.send(user)
        return team_run

    return run


# --- human-in-the-loop fixtures (tests/test_hitl.py, tests/test_protocols.py) ----


class FakeClock:
    """A clock a test moves by hand: ``Team(clock=...)`` reads ``now()``."""

    def __init__(self) -> None:
        from datetime import UTC, datetime

        self.current = datetime(2030, 1, 1, 9, 0, 0, tzinfo=UTC)

    def now(self):
        return self.current

    def advance(self, seconds: float) -> None:
        from datetime import timedelta

        self.current += timedelta(seconds=seconds)


def assert_each_message_once(values: dict) -> None:
    """Every history holds each message once: no repeated AI message, tool result or inbox batch.

    Also checks that each tool result answers a tool call made earlier in the same history.
    """
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    for name, history in values.get("histories", {}).items():
        ai_ids = [m.id for m in history if isinstance(m, AIMessage)]
        assert None not in ai_ids, f"{name}: an AI message without an id"
        assert len(ai_ids) == len(set(ai_ids)), f"{name}: an AI message appears twice: {ai_ids}"
        results = [m.tool_call_id for m in history if isinstance(m, ToolMessage)]
        assert len(results) == len(set(results)), f"{name}: a tool call answered twice: {results}"
        inbox = [str(m.content) for m in history if isinstance(m, HumanMessage)]
        assert len(inbox) == len(set(inbox)), f"{name}: a user-role message appears twice: {inbox}"
        calls_so_far: set[str] = set()
        for message in history:
            if isinstance(message, AIMessage):
                calls_so_far.update(c["id"] for c in message.tool_calls)
            elif isinstance(message, ToolMessage):
                assert message.tool_call_id in calls_so_far, (
                    f"{name}: tool result for {message.tool_call_id} before (or without) its call"
                )
    user_ids = [m.id for m in values.get("messages", [])]
    assert len(user_ids) == len(set(user_ids)), f"the user conversation repeats a message: {user_ids}"


class HitlRun(TeamRun):
    """One scripted team thread driven through interrupts.

    ``send`` and ``resume`` return ``graph.invoke``'s output and check, after every
    call, that no history holds a message twice and that histories only grew.
    """

    def __init__(self, team, graph, config, clock) -> None:
        super().__init__(team, graph, config)
        self.clock = clock
        self._last_histories: dict = {}

    def _checked(self, out: dict) -> dict:
        values = self.values
        assert_each_message_once(values)
        for name, before in self._last_histories.items():
            now = values["histories"].get(name, [])
            assert now[: len(before)] == before, f"{name}'s history was rewritten, not appended to"
        self._last_histories = {n: list(h) for n, h in values.get("histories", {}).items()}
        return out

    def check_histories(self) -> None:
        """Each message once in every history, and histories only grew since the last check."""
        self._checked({})

    def send(self, text: str) -> dict:
        return self._checked(self.graph.invoke({"messages": [("user", text)]}, self.config))

    def resume(self, answers) -> dict:
        from langgraph.types import Command

        return self._checked(self.graph.invoke(Command(resume=answers), self.config))


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock at 2030-01-01 09:00 UTC that only moves when the test advances it."""
    return FakeClock()


@pytest.fixture
def hitl_team(team_home: Path, fake_clock: FakeClock, compiled_teams):
    """Factory: ``hitl_team(script, policy=..., roles_dir=..., fresh=False)`` -> HitlRun.

    Every run gets a thread of its own and reads time from ``fake_clock``. Compiling a
    team costs far more than running a scripted scenario, so runs with the same policy
    (and no ``roles_dir``) share one compiled team on one SQLite file and only swap the
    ScriptedChatModel's script. ``fresh=True`` (or a ``roles_dir``) builds a team of its
    own living in ``team_home`` (or ``home``): for tests about the home folder.
    """
    from teamgraph import Policy, ScriptedChatModel, Team

    used_here: set[str] = set()  # a second run of this test with the same policy gets its own team

    def build(script, *, policy=None, roles_dir=None, thread: str = "t", home=None, fresh: bool = False) -> HitlRun:
        model = ScriptedChatModel(script)  # validates the script
        policy = policy or Policy()
        key = policy.model_dump_json()
        if fresh or roles_dir is not None or home is not None or key in used_here:
            team = Team(model=model, home=home or team_home, policy=policy, roles_dir=roles_dir, clock=fake_clock)
            graph = team.compile()
        else:
            team, graph = compiled_teams(policy, clock=fake_clock)
            used_here.add(key)
            team.runtime.model.script = model.script
        config = {"configurable": {"thread_id": f"{thread}-{next(_THREADS)}"}}
        return HitlRun(team, graph, config, fake_clock)

    return build


from tests.invariants import assert_deliveries_consistent  # noqa: E402

# --- collaboration and sessions fixtures (tests/test_collaboration.py, tests/test_sessions.py) ---

LIAISON_ROLE = """---
id: liaison
name: Liaison
description: A member that works with other sessions of the team (docs/protocols.md, "Sessions").
tools: [member, files, protocols, sessions]
---

You coordinate with the other sessions of the team: list them, send them requests,
and delegate background runs to them.
"""
"""A member role with the sessions tool set (built-in members do not have it)."""


@pytest.fixture(scope="session")
def sessions_roles_dir(tmp_path_factory) -> Path:
    """A roles_dir holding ``liaison`` (display name "Liaison"): a member with sessions tools."""
    folder = tmp_path_factory.mktemp("sessions-roles")
    (folder / "liaison.md").write_text(LIAISON_ROLE, encoding="utf-8")
    return folder


class ClockedRun(HitlRun):
    """A HitlRun that also checks the delivery records after every ``send`` and ``resume``."""

    def _checked(self, out: dict) -> dict:
        out = super()._checked(out)
        assert_deliveries_consistent(self.values)
        return out

    def deliveries(self) -> dict:
        return self.values.get("deliveries", {})


@pytest.fixture
def clocked_team(fake_clock: FakeClock, sessions_roles_dir: Path, compiled_teams):
    """Factory: ``clocked_team(script, policy=...)`` -> ClockedRun.

    The team knows the built-in roles plus ``liaison`` (a member with the sessions
    tools) and reads time from ``fake_clock``. Runs with the same policy share one
    compiled team (a thread each; the ScriptedChatModel's script is swapped), so a
    scenario costs a fraction of a second. The team's home is ``run.team.home``,
    shared by those runs: use project names of your own.
    """
    from teamgraph import Policy, ScriptedChatModel

    def build(script, *, policy=None, thread: str = "t") -> ClockedRun:
        model = ScriptedChatModel(script)  # validates the script
        team, graph = compiled_teams(policy or Policy(), roles_dir=sessions_roles_dir, clock=fake_clock)
        team.runtime.model.script = model.script
        config = {"configurable": {"thread_id": f"{thread}-{next(_THREADS)}"}}
        return ClockedRun(team, graph, config, fake_clock)

    return build


# --- a whole-suite run on every core ------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """A run of the whole suite (no paths named: ``python -m pytest [-m "not slow"]``) runs its
    files on one pytest-xdist worker per core, each file on one worker (``--dist loadfile``: its
    module fixtures, servers included, start once).

    A run that names files or tests stays in this process (no workers to start), as does one
    that asks for ``-n``, ``--pdb``, ``-s``, ``--collect-only`` or ``-p no:xdist``.
    """
    option = config.option
    if (
        not config.pluginmanager.hasplugin("xdist")
        or hasattr(config, "workerinput")  # NOTE: a worker: its controller spreads the files
        or config.args_source is not pytest.Config.ArgsSource.TESTPATHS
        or option.numprocesses is not None
        or option.usepdb
        or option.capture == "no"
        or option.collectonly
    ):
        return
    option.numprocesses = "auto"
    option.dist = "loadfile"


# --- the `slow` marker -------------------------------------------------------------

SLOW_FIXTURES = frozenset({"postgres_url", "postgres_server", "restartable_postgres"})
"""A test that needs a PostgreSQL server is slow wherever it lives (``pg_fixtures`` fails one that is not)."""
POSTGRES_PARAM = "postgres"
"""A parameter value naming PostgreSQL (``"postgres"``, ``"team-postgres"``): that case asks for the
server inside the test (``request.getfixturevalue``), so only its parameter tells."""
SLOW_TESTS = frozenset(
    {
        # NOTE: asks for PostgreSQL inside the test, with no parameter naming it.
        "test_a_postgres_thread_resumed_at_the_new_roster_cadence_reads_the_same_at_either_cadence",
        # NOTE: a new Python process per block of each page; test_readme's quickstart test runs the
        # README's quickstart block the same way in the fast loop, and checks what it prints too.
        "test_python_block_runs_as_printed",
    }
)
FAST_CASES = {
    # NOTE: 56 interleavings per scheduler: the fast loop runs them under "completions", where steps
    # finish in any order; the full run under "auto" (lockstep for a scripted team) too.
    "test_the_outcome_of_a_call_does_not_depend_on_what_the_callee_did_meanwhile": ("scheduling", "completions"),
}
"""Parametrized tests of which the fast loop runs one value of a parameter (the full run, all)."""


def _slow(item: pytest.Item) -> bool:
    name = getattr(item, "originalname", item.name)
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or name in SLOW_TESTS:
        return True
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    if name in FAST_CASES:
        param, fast = FAST_CASES[name]
        return params.get(param) != fast
    return any(isinstance(v, str) and POSTGRES_PARAM in v.split("-") for v in params.values())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark slow the tests that need PostgreSQL (by fixture, parameter or name), the pages' Python blocks
    and the race matrix's lockstep half."""
    for item in items:
        if _slow(item):
            item.add_marker(pytest.mark.slow)
