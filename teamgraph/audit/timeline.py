"""A run over time, one lane per agent, derived from a thread's checkpoints alone.

Each checkpoint is a moment (its ``created_at``) and a state. Between two of them the
state shows what happened: an agent's history grew (its model call ended, and with it
the tool calls that ran at once), an agent entered ``team["in_flight"]`` (its model
call started), a tool call stayed open (a wait: on a person, or on another agent), a
message was delivered, a request was answered. So the timeline needs no model and no
log: ``Team.timeline(config)`` reads ``get_state_history`` and calls :func:`build_timeline`.

Times are seconds since the thread's first checkpoint. A model call's start is the first
checkpoint of the run of checkpoints, just before its end, in which the agent had a step
in flight (else the checkpoint before its end); calls that end at the same checkpoint
(a slice of several, in threads written before each call had a task of its own) share
that interval evenly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from teamgraph.records import LEADER, USER

__all__ = ["PERSON", "Arrow", "Mark", "Span", "Timeline", "build_timeline"]

PERSON = "person"
"""The lane of the person: the user's tasks, and the questions and approvals routed to them."""
_PERSON_NAMES = frozenset({USER, "human", PERSON})
SpanKind = Literal["model", "tool", "wait_person", "wait_agent"]


@dataclass(frozen=True)
class Span:
    """Something an agent did or waited for, from ``start`` to ``end`` (seconds)."""

    lane: str
    kind: SpanKind
    start: float
    end: float
    label: str


@dataclass(frozen=True)
class Mark:
    """A tool call that ran within its model call's step (drawn as a tick at ``at``)."""

    lane: str
    at: float
    label: str


@dataclass(frozen=True)
class Arrow:
    """A message from one lane to another: an envelope delivered, or a request's answer."""

    sender: str
    receiver: str
    start: float
    end: float
    kind: Literal["message", "answer", "request"]
    label: str


@dataclass
class Timeline:
    """One thread's run as lanes, spans, tool ticks and arrows; draw it with :meth:`png` or :meth:`html`.

    In a notebook a Timeline shows itself as its PNG.
    """

    thread: str
    lanes: list[str]
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)
    began: str = ""
    """The first checkpoint's time (ISO); every time is seconds after it."""

    @property
    def duration(self) -> float:
        """Seconds from the first checkpoint to the last event."""
        ends = [s.end for s in self.spans] + [m.at for m in self.marks] + [a.end for a in self.arrows]
        return max(ends, default=0.0)

    def count(self, kind: str) -> int:
        """How many spans of ``kind`` (``"model"``, ``"wait_person"``…) the timeline has."""
        return sum(1 for s in self.spans if s.kind == kind)

    def png(self, *, width: float = 12.0) -> bytes:
        """The timeline as a PNG image (needs the ``timeline`` extra: matplotlib)."""
        from teamgraph.audit.timeline_plot import draw_png

        return draw_png(self, width=width)

    def html(self) -> str:
        """The timeline as an interactive HTML page (needs the ``timeline`` extra: plotly)."""
        from teamgraph.audit.timeline_plot import draw_html

        return draw_html(self)

    def save(self, path: str | Path) -> Path:
        """Write the PNG (``.png``) or the HTML page (``.html``) to ``path``; returns it."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".png", ".html"):
            raise ValueError(f"{path}: a timeline is saved as .png or .html; name the file so.")
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".png":
            path.write_bytes(self.png())
        else:
            path.write_text(self.html(), encoding="utf-8")
        return path

    def _repr_png_(self) -> bytes:
        return self.png()


@dataclass
class _Frames:
    """The checkpoints, oldest first: their times and the state values."""

    times: list[float]
    values: list[Mapping[str, Any]]

    def first(self, test: Any, start: int = 0) -> int | None:
        """The index of the first frame from ``start`` whose values pass ``test``."""
        return next((k for k in range(start, len(self.values)) if test(self.values[k])), None)


def _lane(name: Any) -> str:
    return PERSON if str(name) in _PERSON_NAMES else str(name)


def _frames(checkpoints: Iterable[tuple[str, Mapping[str, Any]]]) -> tuple[_Frames, str]:
    ordered = sorted(((datetime.fromisoformat(t), v or {}) for t, v in checkpoints), key=lambda p: p[0])
    if not ordered:
        return _Frames([], []), ""
    began = ordered[0][0]
    return _Frames([(t - began).total_seconds() for t, _ in ordered], [v for _, v in ordered]), began.isoformat()


def _dispatch(values: Mapping[str, Any], name: str) -> Any:
    """The dispatch number of ``name``'s step in flight at this checkpoint (None: none)."""
    return ((values.get("team") or {}).get("in_flight") or {}).get(name)


def _arrivals(frames: _Frames, read: Any) -> list[int]:
    """For each item of the final sequence ``read(values)``, the first frame that holds it."""
    out: list[int] = []
    for k, values in enumerate(frames.values):
        out.extend([k] * max(0, len(read(values) or ()) - len(out)))
    return out


def _call_start(frames: _Frames, name: str, end: int) -> int:
    """The first checkpoint at which the step that ends at ``end`` was in flight (else ``end - 1``)."""
    start = max(end - 1, 0)
    dispatch = _dispatch(frames.values[start], name)
    while dispatch is not None and start > 0 and _dispatch(frames.values[start - 1], name) == dispatch:
        start -= 1
    return start


def _wait_kind(frames: _Frames, name: str, call_id: str, begin: int, end: int) -> tuple[SpanKind, str]:
    for values in frames.values[begin : end + 1]:
        wait = (((values.get("agents") or {}).get(name) or {}).get("waits") or {}).get(call_id)
        if wait:
            on = _lane(wait.get("on"))
            return ("wait_person" if on == PERSON else "wait_agent"), f"waits for {on}"
    return "tool", ""


def _agent_events(timeline: Timeline, frames: _Frames, name: str, history: Sequence[Any]) -> None:
    """The model calls, tool ticks and waits of one agent."""
    arrivals = _arrivals(frames, lambda v: (v.get("histories") or {}).get(name))
    results = {getattr(m, "tool_call_id", None): i for i, m in enumerate(history) if getattr(m, "type", "") == "tool"}
    calls = [i for i, m in enumerate(history) if getattr(m, "type", "") == "ai" and i < len(arrivals)]
    by_end: dict[int, list[int]] = {}
    for i in calls:
        by_end.setdefault(arrivals[i], []).append(i)
    last = frames.times[-1]
    for end, indexes in by_end.items():
        start = _call_start(frames, name, end)
        t0, t1 = frames.times[start], frames.times[end]
        share = (t1 - t0) / len(indexes)
        for n, i in enumerate(indexes):
            done = t0 + share * (n + 1)
            message = history[i]
            tools = [str(c.get("name")) for c in getattr(message, "tool_calls", None) or ()]
            timeline.spans.append(Span(name, "model", t0 + share * n, done, ", ".join(tools) or "reply"))
            for call in getattr(message, "tool_calls", None) or ():
                answered = results.get(call.get("id"))
                landed = arrivals[answered] if answered is not None and answered < len(arrivals) else None
                if landed == end:
                    timeline.marks.append(Mark(name, done, str(call.get("name"))))
                    continue
                kind, label = _wait_kind(frames, name, str(call.get("id")), end, landed or len(frames.times) - 1)
                until = frames.times[landed] if landed is not None else last
                timeline.spans.append(Span(name, kind, done, until, label or str(call.get("name"))))


def _when(frames: _Frames, test: Any) -> float | None:
    k = frames.first(test)
    return None if k is None else frames.times[k]


def _delivery_arrows(timeline: Timeline, frames: _Frames, deliveries: Mapping[str, Any]) -> None:
    for mid, record in deliveries.items():
        if record.get("sender") == "router" or record.get("status") == "bounced":
            continue
        sent = _when(frames, lambda v, mid=mid: mid in (v.get("deliveries") or {}))
        came = _when(
            frames,
            lambda v, mid=mid: ((v.get("deliveries") or {}).get(mid) or {}).get("status") in ("delivered", "read"),
        )
        if sent is None:
            continue
        sender, receiver = _lane(record.get("sender")), _lane(record.get("to"))
        timeline.arrows.append(Arrow(sender, receiver, sent, came if came is not None else sent, "message", mid))


def _report_arrows(timeline: Timeline, frames: _Frames, messages: Sequence[Any]) -> None:
    """The leader's replies to the person, when each reached the user-facing ``messages``."""
    arrivals = _arrivals(frames, lambda v: v.get("messages"))
    for i, message in enumerate(messages[: len(arrivals)]):
        if getattr(message, "type", "") == "ai":
            at = frames.times[arrivals[i]]
            timeline.arrows.append(Arrow(LEADER, PERSON, at, at, "answer", "report"))


def _request_arrows(timeline: Timeline, frames: _Frames, requests: Mapping[str, Any]) -> None:
    """A request routed to the person goes there and back; an agent's answer comes back to the asker."""
    for rid, record in requests.items():
        asker = _lane(record.get("from"))
        decider = _lane(record.get("route") or record.get("to"))
        opened = _when(frames, lambda v, rid=rid: rid in (v.get("requests") or {}))
        closed = _when(
            frames, lambda v, rid=rid: ((v.get("requests") or {}).get(rid) or {}).get("status") not in (None, "pending")
        )
        if opened is None:
            continue
        if decider == PERSON:
            timeline.arrows.append(Arrow(asker, PERSON, opened, opened, "request", rid))
        if closed is not None and decider != asker and record.get("status") in ("answered", "approved", "rejected"):
            timeline.arrows.append(Arrow(decider, asker, closed, closed, "answer", f"{rid} {record.get('status')}"))


def _lanes(final: Mapping[str, Any], arrows: list[Arrow]) -> list[str]:
    agents = final.get("agents") or {}
    names = sorted(agents, key=lambda n: (n != LEADER, agents[n].get("index", 0), n))
    person = any(PERSON in (a.sender, a.receiver) for a in arrows)
    return ([PERSON] if person else []) + names


def build_timeline(thread: str, checkpoints: Iterable[tuple[str, Mapping[str, Any]]]) -> Timeline:
    """The timeline of a thread from its checkpoints ``(created_at ISO, state values)``, in any order.

    Args:
        thread: The thread id (for the title).
        checkpoints: Every checkpoint of the thread's root graph.

    Returns:
        The timeline; empty lanes for a thread with no checkpoint.
    """
    frames, began = _frames(checkpoints)
    timeline = Timeline(thread=thread, lanes=[], began=began)
    if not frames.values:
        return timeline
    final = frames.values[-1]
    for name, history in (final.get("histories") or {}).items():
        _agent_events(timeline, frames, name, list(history))
    _delivery_arrows(timeline, frames, final.get("deliveries") or {})
    _request_arrows(timeline, frames, final.get("requests") or {})
    _report_arrows(timeline, frames, list(final.get("messages") or ()))
    timeline.lanes = _lanes(final, timeline.arrows)
    known = set(timeline.lanes)
    timeline.arrows = [a for a in timeline.arrows if a.sender in known and a.receiver in known]
    return timeline
