"""Shared names and scripts of the collaboration and delivery tests."""

from __future__ import annotations

from fidelity_fixtures import Brief, brief
from scripting import act, call

LEADER = "Team Leader"
PM, TM = "Project Manager_1", "Task Manager_1"
R1, R2, R3 = "Researcher_1", "Researcher_2", "Researcher_3"

CREATE_PM_AND_RESEARCHERS = act(
    call("create_sub_agent", role_id="project-manager", task="Coordinate the research."),
    call("create_sub_agent", role_id="researcher"),
    call("create_sub_agent", role_id="researcher"),
)


def call_envelope(sender: str, request_id: str, body: str) -> Brief:
    return brief("Call", sender, "Call", body, request_id)
