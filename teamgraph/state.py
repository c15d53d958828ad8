"""The team's state schema and its reducers.

Everything here is plain data (dicts, lists, strings, LangChain messages): it is
serialized into every checkpoint. The records are typed in ``teamgraph/records.py``;
``teamgraph/history.py`` is how a history the Team's saver loaded is read lazily.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, cast

import ormsgpack
from langchain_core.messages import AnyMessage, convert_to_messages
from langgraph.channels import DeltaChannel
from langgraph.graph.message import Messages, add_messages
from typing_extensions import TypedDict

from teamgraph.history import Histories, HistoryAppend, join_history
from teamgraph.records import AgentRecord, Delivery, Effect, Request, TeamBook

# NOTE: DeltaChannel writes a full snapshot every `snapshot_frequency` updates;
# between snapshots a checkpoint stores only what changed. The cadence was chosen
# from bench/ (storage per message vs. the time to rebuild state on resume).
HISTORY_SNAPSHOT_FREQUENCY = 3000
ROSTER_SNAPSHOT_FREQUENCY = 100
"""The ``agents`` channel's cadence. NOTE: the roster is one record per agent and each of
its writes a whole record: a snapshot of it every 100 updates costs a few bytes per
message, and spares a resume reading every status change since the run began."""


def append_histories(
    current: Mapping[str, Sequence[AnyMessage]] | None,
    writes: Sequence[Mapping[str, Sequence[AnyMessage]]],
) -> Histories:
    """Append each write's messages to the named agents' histories.

    Batching-invariant (as DeltaChannel requires): folding writes one batch at a
    time or all at once gives the same histories. Lists are never mutated in place,
    because checkpointed copies of the channel share them. A history the Team's saver
    loaded stays a :class:`~teamgraph.history.History` whose stored batches are decoded
    only when read (``teamgraph/history.py``).
    """
    merged = Histories(current or {})
    batches: dict[str, list[Sequence[AnyMessage]]] = {}
    for write in writes:
        for agent, messages in write.items():
            batches.setdefault(agent, []).append(messages)
    for agent, appended in batches.items():
        merged[agent] = join_history(merged.get(agent), appended)
    return merged


def append_conversation(current: list[AnyMessage] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """``add_messages`` for the user-facing conversation, with ids that replay identically.

    NOTE: ``messages`` is a DeltaChannel, so a checkpoint stores only the new messages
    instead of the whole conversation again (a 300 KB task used to add 600 KB per
    leader step). Its writes are replayed on load, so a message without an id gets
    one from its position (``m-<n>``), never a random one: the same on every replay.
    Batching-invariant: each write is folded in turn.
    """
    merged: list[AnyMessage] = list(current or [])
    for write in writes:
        batch = convert_to_messages(write if isinstance(write, list) else [write])
        fresh = []
        for offset, message in enumerate(batch):
            if message.id is None:
                message = message.model_copy(update={"id": f"m-{len(merged) + offset + 1}"})
            fresh.append(message)
        merged = cast(list[AnyMessage], add_messages(cast(Messages, merged), cast(Messages, fresh)))
    return merged


class RecordsUpdate(dict[str, Any]):
    """A write to ``agents``, ``requests`` or ``deliveries``: the changed records by id.

    NOTE: a plain dict to every checkpointer. The Team's serializer stores each record
    encoded on its own, and the Team's SQLite saver hands a replayed write's records over
    still encoded (an :class:`EncodedRecord`): ``merge_records`` decodes only the records
    that survive the fold (a 5 000-message thread replays 2 499 registry writes for its 3
    agents).
    """


class EncodedRecord:
    """A record as the Team's saver stored it, not decoded yet (``merge_records`` decodes it)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def decode(self) -> dict[str, Any]:
        record = ormsgpack.unpackb(self.data)
        if not isinstance(record, dict):
            raise ValueError(f"a stored record should be a dict: {record!r:.80}")
        return record


def merge_records(
    current: dict[str, dict[str, Any]] | None,
    writes: Sequence[Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Upsert records by id: a later write of an id replaces the earlier record.

    A record still encoded (an :class:`EncodedRecord`, see :class:`RecordsUpdate`) is
    decoded once it is the one that stays.
    """
    merged = dict(current or {})
    for write in writes:
        merged.update(write)
    for key in {key for write in writes for key, record in write.items() if isinstance(record, EncodedRecord)}:
        record = merged[key]
        if isinstance(record, EncodedRecord):
            merged[key] = record.decode()
    return merged


class Taken(TypedDict):
    """An ``outbox`` write that drops the first ``taken`` effects: those a router pass applied."""

    taken: int


def post_effects(current: list[Effect] | None, write: list[Effect] | Taken | None) -> list[Effect]:
    """The ``outbox`` reducer: a list of effects is appended; ``{"taken": n}`` drops the first ``n``.

    NOTE: the router takes the effects it applied by count, so effects a node posts in the
    same superstep (the human gate beside the router after an edit) stay, in either order.
    The effects stay until a pass takes them: an edit of a checkpoint taken between an
    agent's node and the router (a fork in Studio) keeps that step's effects for the pass.
    """
    current = list(current or [])
    if isinstance(write, Mapping) and "taken" in write:
        return current[write["taken"] :]
    return [*current, *(write or [])]


class TeamState(TypedDict, total=False):
    """The state of one team thread.

    Attributes:
        messages: The user-facing conversation: the user's input and the Team
            Leader's replies.
        histories: Every agent's own conversation, by display name: a list, or (loaded
            by the Team's saver) a read-only ``History`` sequence that decodes on read.
        agents: The registry: display name -> role, status, counters, waits, inbox.
            Written by the router only.
        requests: Every question, approval and protocol request, open or closed,
            by request id (``ask_1``, ``plan_2``, ...). Written by the router only.
        deliveries: Every message's delivery record by message id (``msg_7``): sender,
            receiver, queued / delivered / read / bounced, and when. Router only.
        team: Team-wide counters (request and output ids, instance numbers) and
            bookkeeping. Written by the router only.
        outbox: The effects the agents' steps (and the human gate) asked for, until
            the router's pass takes them (``post_effects``).
    """

    messages: Annotated[
        list[AnyMessage],
        DeltaChannel(append_conversation, snapshot_frequency=HISTORY_SNAPSHOT_FREQUENCY),
    ]
    histories: Annotated[
        dict[str, list[AnyMessage]],
        DeltaChannel(append_histories, snapshot_frequency=HISTORY_SNAPSHOT_FREQUENCY),
    ]
    agents: Annotated[
        dict[str, AgentRecord],
        DeltaChannel(merge_records, snapshot_frequency=ROSTER_SNAPSHOT_FREQUENCY),
    ]
    requests: Annotated[
        dict[str, Request],
        DeltaChannel(merge_records, snapshot_frequency=HISTORY_SNAPSHOT_FREQUENCY),
    ]
    deliveries: Annotated[
        dict[str, Delivery],
        DeltaChannel(merge_records, snapshot_frequency=HISTORY_SNAPSHOT_FREQUENCY),
    ]
    team: TeamBook
    outbox: Annotated[list[Effect], post_effects]


TEAM_CHANNELS: tuple[str, ...] = tuple(TeamState.__annotations__)
"""Every channel of the team state: what a task reads when it reads the whole committed state."""


class TeamInput(TypedDict, total=False):
    """What a caller passes to ``graph.invoke``: new user messages."""

    messages: Annotated[
        list[AnyMessage],
        DeltaChannel(append_conversation, snapshot_frequency=HISTORY_SNAPSHOT_FREQUENCY),
    ]


class TeamOutput(TypedDict, total=False):
    """What ``graph.invoke`` returns and every ``values`` chunk (Studio, ``graph.stream``) carries.

    NOTE: only what stays small as a run grows: the user-facing conversation, the roster
    with statuses, and the team book (plan, board, counters). ``histories``, ``requests``
    and ``deliveries`` grow with every message: a ``values`` chunk per superstep carrying
    them made a stream's bytes per message grow with the run's length. They are in the
    state: ``team.history(config, name)``, ``team.state(config)`` or ``graph.get_state``.
    """

    messages: Annotated[
        list[AnyMessage],
        DeltaChannel(append_conversation, snapshot_frequency=HISTORY_SNAPSHOT_FREQUENCY),
    ]
    agents: Annotated[
        dict[str, AgentRecord],
        DeltaChannel(merge_records, snapshot_frequency=ROSTER_SNAPSHOT_FREQUENCY),
    ]
    team: TeamBook


class RouterInput(TypedDict, total=False):
    """What the router node receives as its input: the effects to apply and the registry.

    NOTE: the router reads the rest of the state through its task's channel reader,
    so its runs in a trace (LangSmith) or a debug stream carry this superstep's
    effects and the roster, not every agent's history. It routes by ``Command(goto=...)``,
    not by an edge (an edge reads every channel afresh).
    """

    outbox: Annotated[list[Effect], post_effects]
    agents: Annotated[
        dict[str, AgentRecord],
        DeltaChannel(merge_records, snapshot_frequency=ROSTER_SNAPSHOT_FREQUENCY),
    ]
    team: TeamBook


class TeamUpdate(TypedDict, total=False):
    """What a router pass or the human gate writes: only the channels it changed.

    Attributes:
        messages: The Team Leader's replies to the user.
        histories: Messages appended to agents' histories.
        agents: The registry records that changed.
        requests: The requests that changed.
        deliveries: The delivery records that changed.
        team: The team book.
        outbox: Effects for the next pass, or how many effects this pass took.
    """

    messages: list[AnyMessage]
    histories: HistoryAppend
    agents: RecordsUpdate
    requests: RecordsUpdate
    deliveries: RecordsUpdate
    team: TeamBook
    outbox: list[Effect] | Taken
