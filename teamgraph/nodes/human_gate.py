"""The human gate: the one place the team pauses for a person.

It raises a single ``interrupt()`` carrying every request routed to a person and
turns the answers it is resumed with into effects for the router.

NOTE: workaround of an upstream behaviour (langgraph 1.x): one interrupt per task
on purpose, because LangGraph derives interrupt ids from the task and several
interrupts in one task get mixed up (langgraph issues #6533, #8579).
"""

from __future__ import annotations

from typing import Any, Protocol

from langgraph.types import interrupt

from teamgraph.audit.log import write_committed
from teamgraph.messaging import effects
from teamgraph.protocols.requests import (
    HUMAN,
    check_human_answer,
    expected_answer,
    is_pending,
    public_view,
)
from teamgraph.records import Request
from teamgraph.runtime import TeamRuntime
from teamgraph.state import TeamState, TeamUpdate

HUMAN_AGENT = "human"
"""The author name of the human gate's effects."""


def pending_for_person(requests: dict[str, Request]) -> dict[str, Request]:
    """The pending requests that wait for a person, by id."""
    return {rid: r for rid, r in requests.items() if is_pending(r) and r.get("route") == HUMAN}


def check_answers(answers: Any, pending: dict[str, Request], requests: dict[str, Request]) -> str | None:
    """Why a resume value is refused, or None if every answer in it is valid.

    Args:
        answers: The resume value.
        pending: The requests waiting for a person.
        requests: Every request of the thread (to say why a closed id is refused).
    """
    listing = "; ".join(
        f"{rid} takes {expected_answer(r['kind'], leader_decided=r.get('leader_decision') is not None)}"
        for rid, r in pending.items()
    )
    if not isinstance(answers, dict) or not answers:
        return (
            f"Resume refused: expected a dict {{request_id: answer}}, got {answers!r}. "
            f"Pending: {listing}. Example: Command(resume={{'{next(iter(pending))}': ...}})."
        )
    for rid, value in answers.items():
        problem = check_human_answer(requests.get(rid), rid, value)
        if problem:
            return f"Resume refused: {problem}. Nothing was changed. Pending: {listing}."
    return None


class HumanGateNode(Protocol):
    def __call__(self, state: TeamState) -> TeamUpdate: ...


def make_human_gate(runtime: TeamRuntime) -> HumanGateNode:
    """The human gate node of a team: it logs what led to the pause, then pauses.

    NOTE: the state it reads is committed, so the collaboration log gets the
    requests the person is asked about before the run stops (and a resumed gate
    writes nothing twice).
    """

    def human(state: TeamState) -> TeamUpdate:
        write_committed(runtime, state)
        return human_gate(state)

    return human


def human_gate(state: TeamState) -> TeamUpdate:
    """Pause for a person; apply the answers given (some or all of the requests)."""
    requests = state.get("requests", {})
    pending = pending_for_person(requests)
    if not pending:
        return {}
    payload: dict[str, Any] = {"requests": {rid: public_view(r) for rid, r in pending.items()}}
    if error := state.get("team", {}).get("resume_error"):
        payload["error"] = error
    answers = interrupt(payload)
    # NOTE: a refused value must change nothing, and raising here would leave the bad
    # resume value stuck to this task; so the refusal goes back through the router
    # and the next interrupt carries it in "error".
    problem = check_answers(answers, pending, requests)
    if problem:
        return {"outbox": [{**effects.resume_error(error=problem), "agent": HUMAN_AGENT}]}
    return {
        "outbox": [
            {**effects.human_answer(request_id=rid, value=value), "agent": HUMAN_AGENT}
            for rid, value in answers.items()
        ]
    }
