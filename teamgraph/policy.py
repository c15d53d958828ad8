"""Policy: the rules a team runs by (who decides what, limits, budgets)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Decider = Literal["leader", "human", "leader_then_human"]
"""Who decides a request: the Team Leader, a person, or the leader first and then
a person who confirms or overrides the leader's decision."""


class Policy(BaseModel):
    """Who decides what, when the team pauses for a person, and the team's limits.

    Attributes:
        ask: Who answers a member's ``ask_master`` question.
        plan: Who approves the Team Leader's plan (``propose_plan``).
        member_plan: Who approves a member's plan (``submit_plan``).
        approval: Who approves a sensitive operation (``request_approval``).
        pause: ``"when_blocked"`` (default): the run pauses for a person only when
            no agent can make progress; ``"immediately"``: as soon as a request
            waits for a person.
        require_plan: Refuse creating members and delegating until a plan is approved.
        shutdown_timeout: Seconds a member has to answer a shutdown request before
            it is terminated and the request expires.
        max_parallel: How many members may have a step in flight at once (the
            leader is not counted).
        priority_aging: Under ``max_parallel`` contention runnable members go by
            their task's priority, then age; every this many router passes a
            member waits raise its rank one level, so nobody starves
            (``teamgraph/ledger/schedule.py``).
        slice_steps: Model calls a member may make in one task while it only does
            work (tool calls with no message, question or request for the team).
            Messages to a member wait for the end of its slice.
        scheduling: ``"completions"``: a member's next step starts as soon as its
            previous one is done and its inbox settled, whatever the others do;
            ``"lockstep"``: every step in flight finishes before any is applied
            (a reproducible interleaving); ``"auto"`` (default): completions, or
            lockstep for a team of scripted models (``ScriptedChatModel``).
        max_turn_steps: Model calls one agent may make in one turn before the
            router stops that turn (a loop guard); the leader is told.
        max_model_calls: Model calls the whole team may make for one user message (a
            run); past it every member is stopped and the leader asked to report.
        max_ping_pong: Rounds a requester and its target may go back and forth
            after a blocking ``sessions_send`` (docs/protocols.md); ``REPLY_SKIP`` ends it sooner.
        peer_traffic: How member-to-member traffic reaches the leader:
            ``"notice"`` (one line per message) or ``"full"`` (full copies).
        commands: Commands ``run_command`` runs without an approval: a command is on
            the list when its arguments begin with an entry's (``"python -m pytest"``
            allows ``python -m pytest -q tests``). Anything else is a sensitive operation.
        leader_reminders: How often the leader is reminded of questions it left
            unanswered, when the team has nothing else to do, before the asker
            gets a "no answer" result (a question never hangs).
        context_tokens: The context window an agent's model call must fit in, in
            tokens. None (default): the model's profile (``max_input_tokens``)
            where LangChain knows it, else 100 000.
        context_threshold: The share of ``context_tokens`` past which an agent's
            older history is replaced, in what its model sees, by a summary.
        log: Write the collaboration log
            (``<home>/project/<project_name>/logs/<date>_<project_name>_collaboration.log``).
        tool_retries: Times a tool call that failed with a transient error is
            retried before the agent gets the error.
        timeout_retry_wait: Seconds a timed-out blocking call (``sessions_send``,
            ``call_agent``...) waits once more, its target reminded, before the caller
            gets the time-out (the collaboration spec §5.1: wait 30 s, retry). 0: no retry.
        notify_master: Tell the Team Leader when a member's call timed out after its
            retry or its tool failed after its retry (the collaboration spec §5.1).
        skill_fallback: A skill that cannot be read tells the agent to do the work
            without it and say so in its report (the collaboration spec §5.1), rather than only
            the error.
        escalation_waits: A member whose failures were escalated to the leader (file
            failures, time-outs, a failed tool) stops its turn and waits for the
            leader's instruction (the collaboration spec §5.2).
        file_failures: Consecutive failed file operations of one agent that
            notify the leader.
        send_timeouts: Consecutive timed-out calls (``sessions_send``...) of one
            agent that notify the leader.
        loop_warn: The same tool with the same arguments this many times in a
            row gives the agent a warning.
        loop_stop: ... and this many times stops its turn and tells the leader.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ask: Decider = "leader"
    plan: Decider = "human"
    member_plan: Decider = "leader"
    approval: Decider = "leader"
    pause: Literal["when_blocked", "immediately"] = "when_blocked"
    require_plan: bool = False
    shutdown_timeout: float = Field(default=300.0, gt=0)
    max_parallel: int = Field(default=8, ge=1)
    priority_aging: int = Field(
        default=4, ge=1, description="Router passes a waiting member needs to rise one priority level (no starvation)."
    )
    slice_steps: int = Field(default=1, ge=1)
    scheduling: Literal["auto", "completions", "lockstep"] = "auto"
    max_turn_steps: int = Field(default=50, ge=1)
    max_ping_pong: int = Field(default=5, ge=0)
    max_model_calls: int = Field(default=2000, ge=1)
    peer_traffic: Literal["notice", "full"] = "notice"
    leader_reminders: int = Field(default=1, ge=0)
    context_tokens: int | None = Field(default=None, ge=1000)
    context_threshold: float = Field(default=0.8, gt=0.1, le=1.0)
    log: bool = True
    tool_retries: int = Field(default=1, ge=0)
    timeout_retry_wait: float = Field(
        default=30.0, ge=0, le=7 * 24 * 3600, description="Seconds a timed-out call waits once more (0: no retry)."
    )
    notify_master: bool = Field(default=True, description="Tell the leader about failures after their retry.")
    skill_fallback: bool = Field(default=True, description="A failed skill: go on without it and say so.")
    escalation_waits: bool = Field(
        default=True, description="An escalated member stops and waits for the leader's instruction."
    )
    file_failures: int = Field(default=3, ge=1)
    send_timeouts: int = Field(default=2, ge=1)
    loop_warn: int = Field(default=3, ge=2)
    loop_stop: int = Field(default=5, ge=2)
    commands: tuple[str, ...] = ()

    def decider(self, kind: str) -> Decider:
        """Who decides a request of ``kind`` (``ask``, ``plan``, ``member_plan``, ``approval``)."""
        return getattr(self, kind)
