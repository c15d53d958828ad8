"""Out-of-order completions in virtual time: ``VirtualCallPool`` pins an interleaving of the
completions scheduler, so a test can assert a whole history, and replay it exactly.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from scripting import act, call, quiet

from teamgraph import Policy
from teamgraph.calls import VirtualCallPool
from teamgraph.messaging import envelopes
from tests.invariants import assert_team_invariants

LEADER = "Team Leader"
SLOW, FAST = "Researcher_1", "UI Operator_1"
COMPLETIONS = Policy(scheduling="completions")


def senders(messages: list[BaseMessage]) -> list[str]:
    """Who sent each enveloped message in ``messages``, in order."""
    return [env["sender"] for m in messages if isinstance(m, HumanMessage) and (env := envelopes.parse(str(m.content)))]


def script(seen: list[list[BaseMessage]]) -> dict:
    def record(turn):
        def play(messages):
            seen.append(list(messages))
            return turn

        return play

    return {
        LEADER: [
            act(
                call("create_sub_agent", role_id="researcher", task="Survey the sources."),
                call("create_sub_agent", role_id="ui-operator", task="Tell Researcher_1 to add the date."),
            ),
            *quiet(),
        ],
        SLOW: [
            record(act(call("list_files"))),
            record(act(call("list_files"))),
            record("Survey done, with the date."),
        ],
        FAST: [
            act(call("send_message", to=SLOW, content="Add the date.")),
            act(call("send_message", to=SLOW, content="And the source.")),
            "Told them.",
        ],
    }


def slow_first_step(agent: str, n: int) -> float:
    """The researcher's first step takes 10 s of virtual time; every other step 1 s."""
    return 10.0 if (agent, n) == (SLOW, 0) else 1.0


def run_pinned(make_team, home: Path, seen: list[list[BaseMessage]]):
    run = make_team(script(seen), policy=COMPLETIONS, home=home, thread="pinned")
    run.team.runtime.calls = VirtualCallPool(latency=slow_first_step)
    run.send("Go")
    return run


def test_a_pinned_interleaving_lets_a_fast_member_finish_first(make_team, tmp_path: Path) -> None:
    seen: list[list[BaseMessage]] = []
    run = run_pinned(make_team, tmp_path, seen)
    # Both messages were sent while the researcher's first (slow) step was in flight: that
    # call had neither, the very next one had both (in lockstep: one, then the other).
    assert [senders(context).count(FAST) for context in seen] == [0, 2, 2]
    # The UI operator finished its whole turn before the researcher's first step landed.
    reports = [s for s in senders(run.history(LEADER)) if s in (SLOW, FAST)]
    assert reports == [FAST, SLOW]
    history = run.history(SLOW)
    at = next(i for i, m in enumerate(history) if FAST in senders([m]))
    assert isinstance(history[at - 1], ToolMessage) and isinstance(history[at - 2], AIMessage)
    assert_team_invariants(run.values)


def test_a_pinned_interleaving_replays_to_the_same_histories(make_team, tmp_path: Path) -> None:
    first = run_pinned(make_team, tmp_path / "a", [])
    second = run_pinned(make_team, tmp_path / "b", [])

    def dump(run) -> dict[str, list[tuple[str, str]]]:
        return {name: [(type(m).__name__, m.text) for m in run.history(name)] for name in (LEADER, SLOW, FAST)}

    assert dump(first) == dump(second)
