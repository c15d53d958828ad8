"""The team's vocabulary: the typed records every layer reads and writes.

Everything here is a ``TypedDict`` (or a constant): in a checkpoint a record is
still the plain dict it always was, so typing them needs no migration. This is
the ground floor: it imports nothing of ours, and every other module may import
it. Each record is written by the router only; tools and nodes read them.

Records:
    AgentRecord: one agent of the registry (``state["agents"][name]``).
    Wait: an open (deferred) tool call of an agent, answered later by the router.
    InboxItem: a message that reached an agent but is not in its history yet.
    Request: one question, plan, approval or protocol request (``state["requests"]``).
    Delivery: the delivery record of one message (``state["deliveries"]``).
    TeamBook: the team-wide book (``state["team"]``), made of named parts.
    Effect: what a step asks the router to do, one TypedDict per ``kind``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypeAlias

from typing_extensions import TypedDict

LEADER = "Team Leader"
"""The leader's display name: there is one leader, never numbered."""
LEADER_ROLE_ID = "team-leader"
"""The leader's role id."""
ROUTER = "router"
"""The sender of the notices the team runtime writes (not an agent)."""
USER = "user"
"""The sender of the user's messages."""

# -- agents ---------------------------------------------------------------------

AgentStatus = Literal["idle", "running", "waiting", "stopped", "terminated", "shutdown", "failed"]
IDLE: AgentStatus = "idle"
"""Between turns: a message that wakes it starts a new turn."""
RUNNING: AgentStatus = "running"
"""In a turn, with a model call due."""
WAITING: AgentStatus = "waiting"
"""In a turn, with a tool call open (a wait) that the router will answer."""
STOPPED: AgentStatus = "stopped"
"""Its turn was ended from outside; a new message starts a new turn."""
TERMINATED: AgentStatus = "terminated"
SHUT_DOWN: AgentStatus = "shutdown"
FAILED: AgentStatus = "failed"
ENDED: frozenset[str] = frozenset({TERMINATED, SHUT_DOWN, FAILED})
"""Statuses of an agent that will never run again."""
ACTIVE: frozenset[str] = frozenset({IDLE, RUNNING, WAITING, STOPPED})
"""Statuses of an agent that can still receive messages."""
BUSY: frozenset[str] = frozenset({RUNNING, WAITING})
"""Statuses of an agent in the middle of a turn."""


class Wait(TypedDict):
    """An open tool call of an agent (``AgentRecord["waits"][call_id]``)."""

    tool: str
    """The tool that was called (the name of the ToolMessage that answers it)."""
    on: str
    """Whom it waits for: an agent's name, or ``human``."""
    request: str | None
    """The request behind it, or None when it waits for an agent's next output."""
    seq: int
    """Team-wide order of opening (for deadlock breaking)."""
    tick: int
    """The tick of the pass that issued the step which opened it: waits of one tick are concurrent."""
    group: NotRequired[list[str]]
    """``call_agents``: the requests that answer the call together."""
    targets: NotRequired[list[str]]
    """``call_agents``: whom each request of the group waits for."""
    size: NotRequired[int]
    """``call_agents``: how many requests the group has once all are opened."""


InboxItem = TypedDict(
    "InboxItem",
    {
        "id": str,  # the message id (msg_N), the key of its Delivery
        "text": str,  # the envelope or notice as the receiver will read it
        "from": str,  # the sender's display name, "router" or "user"
        "wake": bool,  # whether it starts a turn of an idle agent
        "kind": NotRequired[str],  # "inbox" for agents' words, "notice:<what>" for the runtime's
    },
)
"""A message in an agent's inbox (``AgentRecord["inbox"]``)."""


class AgentRecord(TypedDict):
    """One agent of the registry: who it is, where it is, what it waits for."""

    name: str
    role: str
    status: AgentStatus
    index: int
    """Order of creation (the leader is 0)."""
    turn: int
    steps: int
    turn_steps: int
    tool_calls: int
    last_tick: int
    """The last tick it was scheduled in (the longest-waiting runs first)."""
    waits: dict[str, Wait]
    inbox: list[InboxItem]
    created_by: str | None
    created_at: str
    last_action: str
    task: str | None
    unread: NotRequired[list[str]]
    """Message ids delivered to its history that no step has read yet."""
    tokens: NotRequired[int]
    slice: NotRequired[int]
    """Model calls made so far in its slice (``Policy.slice_steps``): while not 0, messages wait."""


# -- requests and deliveries -------------------------------------------------------

RequestKind = Literal["ask", "question", "plan", "member_plan", "shutdown", "approval", "run"]
RequestStatus = Literal["pending", "answered", "approved", "rejected", "expired", "cancelled"]
DeliveryStatus = Literal["queued", "delivered", "read", "bounced"]

Request = TypedDict(
    "Request",
    {
        "id": str,  # ask_1, plan_2, ...: the kind's prefix and one counter for every kind
        "kind": str,  # a RequestKind
        "from": str,  # who asked
        "to": str,  # who must answer ("user" for a person)
        "body": str,
        "status": str,  # a RequestStatus
        "answer": Any,
        "opened_at": str,
        "closed_at": str | None,
        "call_id": NotRequired[str | None],  # the asker's waiting tool call
        "tool": NotRequired[str | None],
        "reply_via": NotRequired[str],  # "tool" or "output"
        "route": NotRequired[str],  # who decides it now: an agent, or "human"
        "decider": NotRequired[str | None],
        "details": NotRequired[dict[str, Any]],
        "deadline": NotRequired[str | None],
        "timeout": NotRequired[float | None],
        "leader_decision": NotRequired[dict[str, Any] | None],
        "note": NotRequired[str | None],
        "message": NotRequired[str],  # the id of its envelope's delivery (causality)
        "timed_out_at": NotRequired[str],
        "retried_at": NotRequired[str],  # a timed-out call was given one more wait (the collaboration spec §5.1)
    },
)
"""One question, plan, approval or protocol request, open or closed."""


class Delivery(TypedDict, total=False):
    """The delivery record of one message: queued, then delivered and read, or bounced."""

    id: str
    sender: str
    to: str
    sent_at: str
    status: str
    """A DeliveryStatus."""
    delivered_at: str | None
    read_at: str | None


# -- the team book -----------------------------------------------------------------


class Counters(TypedDict, total=False):
    """Ids: every id of a thread comes from here, so a resume in a new process continues them."""

    counters: dict[str, int]
    """Per id family (``request``, ``message``, ``out``, ``wait``): the last number taken."""
    instances: dict[str, int]
    """Per role display name: the last member number taken (names are never reused)."""


class RunBook(TypedDict, total=False):
    """The user's current task (a run): what was read, spent and reported."""

    user_seen: int
    """How many of the user-facing messages the router has taken in."""
    run_calls: int
    """Model calls since the user's last message (``Policy.max_model_calls``)."""
    reported: int
    """``user_seen`` when the leader last answered the user."""
    report_asked: int
    budget_told: int | None
    resume_error: str | None
    """Why the last resume value was refused (shown by the human gate)."""
    log_base: str | None
    """The checkpoint the last router pass read, whose log lines its branch's next ones follow."""
    project: str
    """The project the thread's last run worked in (``audit/project.py``), for what resumes it
    without naming one (the CLI)."""


class Schedule(TypedDict, total=False):
    """What runs next."""

    tick: int
    scheduled: list[str]
    """The agents that step in the next superstep."""
    human: bool
    """Whether the human gate runs in the next superstep."""
    open: list[str]
    """The ids of pending requests (so a pass never scans every request)."""
    reminded: dict[str, int]
    """Per request routed to the leader: how many reminders it got."""
    in_flight: dict[str, int]
    """Per agent with a step in flight: the dispatch number of that step."""
    perform: dict[str, str]
    """Per agent whose approved sensitive operation its node performs next: the request id."""


class Conversation(TypedDict):
    """A ping-pong exchange between two agents (``sessions_send`` with ``ping_pong``)."""

    a: str
    b: str
    round: int
    next: str


class Task(TypedDict, total=False):
    """One task on the board (``teamgraph/governance/board.py`` changes it)."""

    id: str
    title: str
    role_id: str | None
    assignee: str | None
    priority: str
    depends_on: list[str]
    status: str
    note: str
    updated_by: str


class FileRecord(TypedDict):
    """A project file's current version and who saw which version (``teamgraph/tools/versions.py``)."""

    version: int
    by: str
    seen: dict[str, int]
    """Per agent that read or wrote it: the newest version it saw."""


class WorkBook(TypedDict, total=False):
    """The work: the plan, the task board, skills given, ping-pong exchanges, project files."""

    plan: dict[str, Any]
    board: list[Task]
    endowments: dict[str, list[dict[str, str]]]
    conversations: dict[str, Conversation]
    files: dict[str, FileRecord]


class TeamBook(Counters, RunBook, Schedule, WorkBook, total=False):
    """The team-wide book (``state["team"]``): one flat dict in checkpoints, typed in named parts."""


# -- effects ---------------------------------------------------------------------------

EffectKind = Literal[
    "spawn", "deliver", "open", "answer", "escalate", "human_answer", "resume_error", "wait_output",
    "terminate", "stop", "board", "board_add", "step", "taken", "performed", "task_create", "task_update", "endow",
    "file",
]  # fmt: skip


class _Effect(TypedDict):
    agent: NotRequired[str]
    """Who asked (set by the step node; the human gate's effects have none)."""


class SpawnEffect(_Effect):
    kind: Literal["spawn"]
    role: str
    name: str
    task: str | None


class DeliverEffect(_Effect):
    kind: Literal["deliver"]
    to: str
    body: str
    type: str


class OpenEffect(_Effect):
    kind: Literal["open"]
    request_kind: str
    body: str
    to: str | None
    call_id: str | None
    tool: str | None
    reply_via: str
    details: dict[str, Any]
    timeout: float | None
    group: int


class AnswerEffect(_Effect):
    kind: Literal["answer"]
    request_id: str
    answer: str
    approve: bool | None


class EscalateEffect(_Effect):
    kind: Literal["escalate"]
    request_id: str
    note: str | None


class HumanAnswerEffect(_Effect):
    kind: Literal["human_answer"]
    request_id: str
    value: Any


class ResumeErrorEffect(_Effect):
    kind: Literal["resume_error"]
    error: str


class WaitOutputEffect(_Effect):
    kind: Literal["wait_output"]
    on: str
    call_id: str
    tool: str


class TerminateEffect(_Effect):
    kind: Literal["terminate"]
    target: str


class StopEffect(_Effect):
    kind: Literal["stop"]
    target: str


class BoardEffect(_Effect):
    kind: Literal["board"]
    task_id: str
    status: str
    note: str | None


class BoardAddEffect(_Effect):
    kind: Literal["board_add"]
    title: str
    assignee: str | None


class StepEffect(_Effect):
    kind: Literal["step"]
    message_index: int | None
    ended_turn: bool
    tool_calls: int
    deferred: list[str]
    tokens: int
    works: NotRequired[bool]
    """The call only did work (tool calls that asked the team for nothing): its slice goes on."""
    error: NotRequired[str]


class TakenEffect(_Effect):
    kind: Literal["taken"]
    seq: int
    read: NotRequired[str]
    """The checkpoint the agent's node read (the collaboration log's base for the state it writes)."""


class PerformedEffect(_Effect):
    kind: Literal["performed"]
    request_id: str
    result: str


class TaskCreateEffect(_Effect):
    kind: Literal["task_create"]
    title: str
    assignee: str | None
    priority: str
    depends_on: list[str]


class TaskUpdateEffect(_Effect):
    kind: Literal["task_update"]
    task_id: str
    status: str | None
    priority: str | None
    note: str | None


class EndowEffect(_Effect):
    kind: Literal["endow"]
    target: str
    skills: list[dict[str, str]]


class FileEffect(_Effect):
    kind: Literal["file"]
    path: str
    """The file's path inside the project folder (POSIX form)."""
    version: int
    action: str
    """``read`` (the caller saw ``version``), or ``write``, ``edit``, ``restore`` (it made ``version``)."""


Effect: TypeAlias = (
    SpawnEffect | DeliverEffect | OpenEffect | AnswerEffect | EscalateEffect | HumanAnswerEffect
    | ResumeErrorEffect | WaitOutputEffect | TerminateEffect | StopEffect | BoardEffect | BoardAddEffect
    | StepEffect | TakenEffect | PerformedEffect | TaskCreateEffect | TaskUpdateEffect | EndowEffect | FileEffect
)  # fmt: skip
"""What a step (or the human gate) asks the router to do, discriminated by ``kind``."""


@dataclass(frozen=True)
class TeamView:
    """The read-only team an agent's step sees: who it is, the registry, the requests, the team book.

    Built once per step (``team_view`` in nodes/agent_step.py) and carried by the role
    subgraph's context; ``run_tool_calls`` turns it into a ``ToolContext`` per call.
    """

    caller: str
    agents: Mapping[str, AgentRecord] = field(repr=False)
    requests: Mapping[str, Request] = field(repr=False)
    team: TeamBook = field(repr=False)
