"""Policy: the rules a team runs by (limits, budgets, who decides what)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Policy(BaseModel):
    """Who decides what, and the team's limits.

    Attributes:
        max_parallel: How many agents may take a step in one superstep.
        max_turn_steps: Model calls one agent may make in one turn before the
            router ends the turn (a loop guard); the leader is told.
        leader_reminders: How often the leader is reminded of questions it left
            unanswered when the team has nothing else to do, before the asker
            gets a "no answer" result (a question never hangs).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_parallel: int = Field(default=8, ge=1)
    max_turn_steps: int = Field(default=50, ge=1)
    leader_reminders: int = Field(default=1, ge=0)
