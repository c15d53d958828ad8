"""Policy: the rules a team runs by (who decides what, limits, budgets)."""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Decider = Literal["leader", "human", "leader_then_human"]
"""Who decides a request: the Team Leader, a person, or the leader first and then
a person who confirms or overrides the leader's decision."""


class Policy(BaseModel):
    """Who decides what, when the team pauses for a person, and the team's limits.

    Every field has a default; ``Policy(ask="human")`` changes one. A field's
    description is its documentation (the docs site's Policy reference is generated
    from these fields), and a ``Policy`` is frozen: ``policy.model_copy(update=...)``
    makes a changed copy.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ask: Decider = Field(default="leader", description="Who answers a member's `ask_master` question.")
    plan: Decider = Field(default="human", description="Who approves the Team Leader's plan (`propose_plan`).")
    member_plan: Decider = Field(default="leader", description="Who approves a member's plan (`submit_plan`).")
    approval: Decider = Field(
        default="leader",
        description="Who approves a sensitive operation (`request_approval`, or a call the permission table "
        "marks sensitive).",
    )
    pause: Literal["when_blocked", "immediately"] = Field(
        default="when_blocked",
        description="`when_blocked`: the run pauses for a person only when no agent can make progress; "
        "`immediately`: as soon as a request waits for a person.",
    )
    require_plan: bool = Field(
        default=False, description="Refuse creating members and delegating until the leader's plan is approved."
    )
    shutdown_timeout: float = Field(
        default=300.0,
        gt=0,
        description="Seconds a member has to answer a shutdown request before it is terminated and the request "
        "expires.",
    )
    max_parallel: int = Field(
        default=8, ge=1, description="How many members may have a step in flight at once (the leader is not counted)."
    )
    priority_aging: int = Field(
        default=4,
        ge=1,
        description="Under `max_parallel` contention runnable members go by their task's priority, then age; every "
        "this many router passes a member waits raise its rank one level, so nobody starves.",
    )
    slice_steps: int = Field(
        default=1,
        ge=1,
        description="Model calls a member makes in a row, while it only does work (tool calls with no message, "
        "question or request for the team), before the messages sent to it meanwhile are delivered: they wait "
        "for the end of its slice. Each call is still a step of its own, in flight like any other.",
    )
    scheduling: Literal["auto", "completions", "lockstep"] = Field(
        default="auto",
        description="`completions`: a member's next step starts as soon as its previous one is done and its inbox "
        "settled, whatever the others do; `lockstep`: every step in flight finishes before any is applied (a "
        "reproducible interleaving); `auto`: completions, or lockstep for a team of scripted models "
        "(`ScriptedChatModel`).",
    )
    max_turn_steps: int = Field(
        default=50,
        ge=1,
        description="Model calls one agent may make in one turn before the router stops that turn (a loop guard); "
        "the leader is told.",
    )
    max_ping_pong: int = Field(
        default=5,
        ge=0,
        description="Rounds a requester and its target may go back and forth after a blocking `sessions_send` "
        "(see Protocols); a reply containing `REPLY_SKIP` ends it sooner.",
    )
    max_model_calls: int = Field(
        default=2000,
        ge=1,
        description="Model calls the whole team may make for one user message (a run); past it every member is "
        "stopped and the leader asked to report.",
    )
    peer_traffic: Literal["notice", "full"] = Field(
        default="notice",
        description="How member-to-member traffic reaches the leader: `notice` (one line per message) or `full` "
        "(full copies).",
    )
    leader_reminders: int = Field(
        default=1,
        ge=0,
        description="How often the leader is reminded of questions it left unanswered, when the team has nothing "
        'else to do, before the asker gets a "no answer" result (a question never hangs).',
    )
    context_tokens: int | None = Field(
        default=None,
        ge=1000,
        description="The context window an agent's model call must fit in, in tokens. None: the model's profile "
        "(`max_input_tokens`) where LangChain knows it, else 100 000.",
    )
    context_threshold: float = Field(
        default=0.8,
        gt=0.1,
        le=1.0,
        description="The share of `context_tokens` past which an agent's older history is replaced, in what its "
        "model sees, by a summary (compaction).",
    )
    log: bool = Field(
        default=True,
        description="Write the collaboration log "
        "(`<home>/logs/<project_name>/<date>_<project_name>_collaboration.log`, out of the agents' reach).",
    )
    tool_retries: int = Field(
        default=1,
        ge=0,
        description="Times a tool call that failed with a transient error (time-out, dropped connection, rate "
        "limit) is retried before the agent gets the error.",
    )
    timeout_retry_wait: float = Field(
        default=30.0,
        ge=0,
        le=7 * 24 * 3600,
        description="Seconds a timed-out blocking call (`sessions_send`, `call_agent`...) waits once more, its target "
        "reminded, before the caller gets the time-out (the collaboration spec 5.1: wait 30 s, retry). 0: no retry.",
    )
    notify_master: bool = Field(
        default=True,
        description="Tell the Team Leader when a member's call timed out after its retry or its tool failed after "
        "its retry (the collaboration spec 5.1).",
    )
    skill_fallback: bool = Field(
        default=True,
        description="A skill that cannot be read tells the agent to do the work without it and say so in its "
        "report (the collaboration spec 5.1), rather than only the error.",
    )
    escalation_waits: bool = Field(
        default=True,
        description="A member whose failures were escalated to the leader (file failures, time-outs, a failed "
        "tool) stops its turn and waits for the leader's instruction (the collaboration spec 5.2).",
    )
    file_failures: int = Field(
        default=3, ge=1, description="Consecutive failed file operations of one agent that notify the leader."
    )
    send_timeouts: int = Field(
        default=2,
        ge=1,
        description="Consecutive timed-out calls (`sessions_send`...) of one agent that notify the leader.",
    )
    loop_warn: int = Field(
        default=3,
        ge=2,
        description="The same tool with the same arguments this many times in a row gives the agent a warning "
        "(waiting and polling tools such as `sleep` never count).",
    )
    loop_stop: int = Field(
        default=5,
        ge=2,
        description="The same tool with the same arguments this many times in a row stops the agent's turn and "
        "tells the leader.",
    )
    commands: tuple[str, ...] = Field(
        default=(),
        description="Commands `run_command` runs without an approval: a command is on the list when its arguments "
        "begin with an entry's, each word exact or a pattern (`python -m pytest` allows `python -m pytest -q tests`; "
        "`git log -n *`). Even then it waits for an approval when it names a path outside the project folder, uses "
        "an option that writes elsewhere or runs another program (git's `--output`, `-c`...), or runs code from the "
        "project folder (python, pytest, make...) with no sandbox (see Security). Entries are checked here: one that "
        "cannot be split is refused.",
    )
    sandbox: Literal["auto", "off"] = Field(
        default="auto",
        description="`auto`: commands run in a bubblewrap sandbox where `bwrap` works (the project folder the only "
        "one they write, no network; an approved command runs outside it); `off`: never.",
    )

    def decider(self, kind: str) -> Decider:
        """Who decides a request of ``kind`` (``ask``, ``plan``, ``member_plan``, ``approval``)."""
        return getattr(self, kind)

    @field_validator("commands")
    @classmethod
    def _command_entries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            try:
                words = shlex.split(entry)
            except ValueError as exc:
                raise ValueError(
                    f"commands entry {entry!r} cannot be split into arguments ({exc}): fix its quotes"
                ) from None
            if not words:
                raise ValueError(f"commands entry {entry!r} is empty: give a program and arguments, e.g. 'git status'")
            if "/" in words[0] and not words[0].startswith("/"):
                raise ValueError(
                    f"commands entry {entry!r} names a program by a relative path, one the agents could write: "
                    "give its name (found on PATH) or its absolute path"
                )
        return value
