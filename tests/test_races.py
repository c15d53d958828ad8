"""Causality: every waiting protocol gives the same outcome whatever the other side does meanwhile.

A caller opens a call (a question, a call, a send, a background run, a shutdown) while the
agent it calls is, in the same superstep, idle, ending its turn with text, ending it
silently, calling a tool, or opening a request of its own; and the two members are
created in either order. Only an output produced after the call was read may answer it,
so every variant must end like the idle one.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from teamgraph import Policy
from teamgraph.calls import VirtualCallPool
from teamgraph.messaging.envelopes import LEADER
from teamgraph.messaging.results import error_of
from tests.invariants import assert_team_invariants
from tests.scripting import act, call

CALLER, OTHER = "Caller_1", "Other_1"
CALL_MARK = "Q-CALL"
ANSWER = "B-answer"

ROLE = """---
id: {id}
name: {name}
description: A member with every member-side tool set.
tools: [member, files, protocols, collaboration, sessions]
level: L2
---

You work with the other members of the team.
"""


@pytest.fixture(scope="module")
def race_roles(tmp_path_factory):
    folder = tmp_path_factory.mktemp("race-roles")
    for role_id, name in (("caller", "Caller"), ("other", "Other")):
        (folder / f"{role_id}.md").write_text(ROLE.format(id=role_id, name=name), encoding="utf-8")
    return folder


@dataclass(frozen=True)
class Protocol:
    """A waiting protocol: who calls, the call, and the tool whose result is the outcome."""

    name: str
    leader_side: bool
    call: dict
    tool: str


PROTOCOLS = [
    Protocol("ask_sub_agent", True, call("ask_sub_agent", display_name=OTHER, question=CALL_MARK), "ask_sub_agent"),
    Protocol("shutdown", True, call("shutdown_request", display_name=OTHER, reason=CALL_MARK), "shutdown_request"),
    Protocol("call_agent", False, call("call_agent", receiver=OTHER, content=CALL_MARK), "call_agent"),
    Protocol("call_agents", False, call("call_agents", receivers=[OTHER], content=CALL_MARK), "call_agents"),
    Protocol(
        "sessions_send",
        False,
        call("sessions_send", sessionKey=OTHER, message=CALL_MARK, timeoutSeconds=600),
        "sessions_send",
    ),
    Protocol("sessions_spawn", False, call("sessions_spawn", task=CALL_MARK, agentId=OTHER), "sessions_spawn"),
    Protocol(
        "ask_other_agent", False, call("ask_other_agent", display_name=OTHER, question=CALL_MARK), "ask_other_agent"
    ),
]

SIDES = {
    "idle": None,
    "ends_with_text": "warm-up done",
    "ends_silently": "",
    "calls_a_tool": act(call("sessions_list")),
    "opens_a_request": act(call("ask_master", question="May I start?")),
}

ID = re.compile(r"· id: ((?:ask|shutdown|run)_\d+)")


def _after_last_ai(messages) -> str:
    tail = []
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            break
        tail.append(str(message.content))
    return "\n".join(reversed(tail))


def _other(first):
    """The called member: its first turn is ``first``; once it has read the call, it answers it."""

    def play(messages):
        answered = any(
            isinstance(m, AIMessage)
            and (
                m.content == ANSWER
                or m.tool_calls
                and m.tool_calls[0]["name"] in ("answer_other_agent", "shutdown_response")
            )
            for m in messages
        )
        envelope = next(
            (str(m.content) for m in messages if isinstance(m, HumanMessage) and CALL_MARK in str(m.content)), None
        )
        if envelope is not None and not answered:
            ids = ID.findall(envelope)
            if "answer_other_agent" in envelope:
                return act(call("answer_other_agent", question_id=ids[-1], answer=ANSWER))
            if "shutdown_response" in envelope:
                return act(call("shutdown_response", request_id=ids[-1], approve=True))
            return ANSWER
        if not any(isinstance(m, AIMessage) for m in messages) and first is not None:
            return first
        return ""

    return [play] * 12


def _leader(protocol: Protocol, *, caller_first: bool, other_task: bool):
    """Creates both members (in the given order), makes a leader-side call, answers questions."""
    creations = [
        call("create_sub_agent", role_id="caller", task="Start." if not protocol.leader_side else None),
        call("create_sub_agent", role_id="other", task="Warm up." if other_task else None),
    ]
    if not caller_first:
        creations.reverse()

    def play(messages):
        turns = sum(isinstance(m, AIMessage) for m in messages)
        if turns == 0:
            return act(*creations)
        if turns == 1 and protocol.leader_side:
            return act(protocol.call)
        questions = ID.findall(_after_last_ai(messages))
        asks = [q for q in questions if q.startswith("ask_")]
        if asks and "Question from" in _after_last_ai(messages):
            return act(call("answer_sub_agent_question", question_id=asks[-1], answer="Yes."))
        return ""

    return [play] * 16


def _caller(protocol: Protocol):
    return [act(protocol.call), *[""] * 8]


def _normalize(text: str) -> str:
    return re.sub(r"\b(out|ask|run|shutdown|msg)_\d+", r"\1_N", text)


def _outcome(run, protocol: Protocol):
    """What a user sees of the call: the caller's result, the call's request, the callee's status."""
    caller = LEADER if protocol.leader_side else CALLER
    results = [_normalize(str(m.content)) for m in run.tool_results(caller, protocol.tool)]
    requests = sorted(
        (r["kind"], r["status"], _normalize(str(r["answer"]))) for r in run.requests().values() if r["from"] == caller
    )
    pushed = [_normalize(text) for text in run.inbox_texts(caller) if ANSWER in text and "Reply from" in text]
    return results, requests, pushed, run.status(OTHER)


@pytest.fixture(scope="module")
def idle_outcomes() -> dict:
    """Each protocol's outcome when the callee is idle, played once per module (a test compares with it)."""
    return {}


def _idle(make_team, race_roles, idle_outcomes: dict, protocol: Protocol):
    if protocol.name not in idle_outcomes:
        idle_outcomes[protocol.name] = _outcome(
            _play(make_team, race_roles, protocol, "idle", caller_first=True), protocol
        )
    return idle_outcomes[protocol.name]


def _play(make_team, race_roles, protocol: Protocol, side: str, *, caller_first: bool, scheduling: str = "auto"):
    first = SIDES[side]
    script = {
        LEADER: _leader(protocol, caller_first=caller_first, other_task=first is not None),
        CALLER: _caller(protocol),
        OTHER: _other(first),
    }
    run = make_team(script, roles_dir=race_roles, policy=Policy(max_parallel=4, scheduling=scheduling))
    run.send("Go")
    assert_team_invariants(run.values)
    return run


@pytest.mark.parametrize("scheduling", ["auto", "completions"], ids=["lockstep", "completions"])
@pytest.mark.parametrize("caller_first", [True, False], ids=["caller-first", "other-first"])
@pytest.mark.parametrize("side", [s for s in SIDES if s != "idle"])
@pytest.mark.parametrize("protocol", PROTOCOLS, ids=[p.name for p in PROTOCOLS])
def test_the_outcome_of_a_call_does_not_depend_on_what_the_callee_did_meanwhile(
    make_team, race_roles, idle_outcomes, protocol, side, caller_first, scheduling
):
    """Under "completions" the calls finish in the threads' order; the outcome must still be the idle one's."""
    idle = _idle(make_team, race_roles, idle_outcomes, protocol)
    busy = _outcome(
        _play(make_team, race_roles, protocol, side, caller_first=caller_first, scheduling=scheduling), protocol
    )
    assert busy == idle
    results, requests, _, _ = busy
    assert len(results) == 1, results  # answered exactly once
    assert all(status != "pending" for _, status, _ in requests)


@pytest.mark.parametrize("protocol", [p for p in PROTOCOLS if p.name == "ask_sub_agent"], ids=lambda p: p.name)
def test_a_wait_is_as_old_as_the_pass_that_issued_its_step_however_late_it_lands(
    make_team, race_roles, idle_outcomes, protocol
):
    """The leader's call and the member's question are made by steps one pass issued: neither
    knew of the other. The leader's step lands passes later (a slow model); the deadlock
    they make is still broken as when both land together (the member is told to answer
    first), not by which completion the router happened to take first."""
    idle = _idle(make_team, race_roles, idle_outcomes, protocol)
    leader = _leader(protocol, caller_first=False, other_task=True)[0]

    def slow_leader(messages):
        if sum(isinstance(m, AIMessage) for m in messages) == 1:
            time.sleep(0.3)  # NOTE: the member's question lands first, passes before the leader's call
        return leader(messages)

    script = {LEADER: [slow_leader] * 16, CALLER: _caller(protocol), OTHER: _other(SIDES["opens_a_request"])}
    run = make_team(script, roles_dir=race_roles, policy=Policy(max_parallel=4, scheduling="completions"))
    run.send("Go")
    assert_team_invariants(run.values)
    assert _outcome(run, protocol) == idle


# A group call whose receivers end while the call is in flight (issue 31, failure 9): the caller's
# step lands after the leader ended one receiver; the call is still answered exactly once.
GROUP = ("Other_1", "Other_2")
ENDINGS = {
    "terminate": call("terminate_sub_agent", display_name=GROUP[0]),
    "shutdown": call("shutdown_request", display_name=GROUP[0], reason="done"),
}


def _group_leader(ending: dict):
    def play(messages):
        turns = sum(isinstance(m, AIMessage) for m in messages)
        if turns == 0:
            return act(
                call("create_sub_agent", role_id="caller", task="Start."),
                call("create_sub_agent", role_id="other", task=None),
                call("create_sub_agent", role_id="other", task=None),
            )
        return act(ending) if turns == 1 else ""

    return [play] * 12


def _group_member(messages):
    """Approves a shutdown; answers a call with its text."""
    shutdowns = ID.findall("\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage)))
    answered = sum(isinstance(m, AIMessage) for m in messages)
    if shutdowns and shutdowns[-1].startswith("shutdown_") and not answered:
        return act(call("shutdown_response", request_id=shutdowns[-1], approve=True))
    return ANSWER if any(CALL_MARK in str(m.content) for m in messages) and not answered else ""


GROUP_CALL = act(call("call_agents", receivers=list(GROUP), content=CALL_MARK))


def _slow_group_call(messages):
    time.sleep(0.6)  # NOTE: as in the issue: the leader's ending lands while this step is in flight
    return GROUP_CALL


@pytest.mark.parametrize("scheduling", ["lockstep", "completions", "completions-threads"])
@pytest.mark.parametrize("ending", list(ENDINGS))
def test_call_agents_is_answered_once_when_a_receiver_ends_while_it_is_in_flight(
    make_team, race_roles, ending, scheduling, tmp_path
):
    """Under "completions" the caller's step is slow (virtual time, or 0.6 s on the threads): it
    lands after the leader's ending; under "lockstep" both land in one pass. Either way: one result."""
    first = _slow_group_call if scheduling == "completions-threads" else GROUP_CALL
    script = {
        LEADER: _group_leader(ENDINGS[ending]),
        CALLER: [first, *[""] * 8],
        **{name: [_group_member] * 8 for name in GROUP},
    }
    policy = Policy(max_parallel=4, scheduling=scheduling.removesuffix("-threads"))  # type: ignore[arg-type]
    # NOTE: virtual time is set on the team's runtime: that run needs a team of its own.
    home = tmp_path / "home" if scheduling == "completions" else None
    run = make_team(script, roles_dir=race_roles, policy=policy, home=home)
    if scheduling == "completions":
        run.team.runtime.calls = VirtualCallPool(latency=lambda agent, n: 9.0 if agent == CALLER else 1.0)
    run.send("Go")
    assert_team_invariants(run.values)
    results = run.tool_results(CALLER, "call_agents")
    assert len(results) == 1, [m.content for m in results]
    assert run.status(GROUP[0]) in ("terminated", "shut_down")
    group = dict(sorted((r["to"], r["status"]) for r in run.requests().values() if r["from"] == CALLER))
    # NOTE: under lockstep the ending receiver may read the call first and answer it, then end.
    # The caller's tools run in its node on the team as it is then: a call naming a receiver
    # that already ended is refused whole, with an error result, and opens no request.
    if group:
        assert group[GROUP[0]] in ("cancelled", "answered") and group[GROUP[1]] == "answered", group
    else:
        assert results[0].status == "error", results[0].content


# --- shared files (collaboration spec §2.2): two members write one file at once ---

SHARED = "shared.md"


def _writer(text: str):
    """Writes shared.md; when refused as stale: reads it, merges, writes again; then ends its turn."""

    def play(messages):
        last = messages[-1]
        if not any(isinstance(m, AIMessage) for m in messages):
            return act(call("write_file", path=SHARED, content=text))
        if error_of(last) == "stale_version":
            return act(call("read_file", path=SHARED))
        asked = next(m for m in reversed(messages) if isinstance(m, AIMessage))
        if asked.tool_calls and asked.tool_calls[0]["name"] == "read_file":
            return act(call("write_file", path=SHARED, content=f"{last.content}\n{text}"))
        return ""

    return [play] * 8


def _creates_both(*, caller_first: bool):
    creations = [
        call("create_sub_agent", role_id="caller", task="Write shared.md."),
        call("create_sub_agent", role_id="other", task="Write shared.md."),
    ]
    return [act(*(creations if caller_first else creations[::-1])), *[""] * 8]


def _file_notices(run, name: str) -> list[str]:
    """``file_changed`` notices ``name`` read or has queued (an idle agent reads them at its next step)."""
    queued = [m["text"] for m in run.agents()[name]["inbox"] if m.get("kind") == "notice:file_changed"]
    return run.notices(name, "file_changed") + queued


@pytest.mark.parametrize("scheduling", ["auto", "completions"], ids=["lockstep", "completions"])
@pytest.mark.parametrize("caller_first", [True, False], ids=["caller-first", "other-first"])
def test_two_members_writing_one_file_at_once_one_wins_the_other_is_told(
    make_team, race_roles, caller_first, scheduling
):
    """Collaboration spec §2.2 (shared files): exactly one write succeeds; the other is told who won, reads, merges."""
    script = {
        LEADER: _creates_both(caller_first=caller_first),
        CALLER: _writer("from caller"),
        OTHER: _writer("from other"),
    }
    run = make_team(script, roles_dir=race_roles, policy=Policy(max_parallel=4, scheduling=scheduling))
    run.send("Go")
    assert_team_invariants(run.values)

    first = {name: run.tool_results(name, "write_file")[0] for name in (CALLER, OTHER)}
    [loser] = [name for name, result in first.items() if error_of(result) == "stale_version"]
    [winner] = [name for name in first if name != loser]
    assert error_of(first[winner]) is None and winner in str(first[loser].content)
    text = (run.team.runtime.project_folder(run.config) / SHARED).read_text(encoding="utf-8")
    words = {CALLER: "from caller", OTHER: "from other"}
    assert text.splitlines() == [words[winner], words[loser]]
    record = run.values["team"]["files"][SHARED]
    assert (record["version"], record["by"]) == (2, loser)
    assert len(_file_notices(run, winner)) == 1 and _file_notices(run, loser) == []
