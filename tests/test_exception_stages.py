"""The exception policy's stages (collaboration spec §5.1 failures, §5.2 escalation), each a Policy field."""

from __future__ import annotations

from conftest import FakeClock
from langchain_core.tools import tool
from scripting import act, after_seconds, call, on_message, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.messaging import notices
from teamgraph.messaging.results import error_of, outcome_of
from teamgraph.tools import errors

LEADER = "Team Leader"
UI = "UI Operator_1"
LIAISON, R1 = "Liaison_1", "Researcher_1"
CONFIG = {"configurable": {"thread_id": "stages"}}
CREATE_LIAISON_AND_RESEARCHER = act(
    call("create_sub_agent", role_id="liaison", task="Ask the researcher."),
    call("create_sub_agent", role_id="researcher"),
)


def _send_run(clocked_team, fake_clock, *, seconds: float, policy: Policy | None = None, slow_steps: int = 1):
    """The liaison asks the researcher with a 30 s time-out; its first ``slow_steps`` take ``seconds`` each."""
    slow = [after_seconds(fake_clock, seconds, act(call("list_files", path="."))) for _ in range(slow_steps)]
    run = clocked_team(
        {
            LEADER: [CREATE_LIAISON_AND_RESEARCHER, *quiet()],
            LIAISON: [
                act(call("sessions_send", sessionKey=R1, message="Check the logs.", timeoutSeconds=30)),
                *["REPLY_SKIP"] * 4,
            ],
            R1: [*slow, *["Logs are clean."] * 3],
        },
        policy=policy,
    )
    run.send("Go")
    return run


def test_a_timed_out_call_waits_and_is_retried_once(clocked_team, fake_clock):
    """Collaboration spec §5.1: a time-out → wait (30 s), retry; a reply within the retry answers the call."""
    run = _send_run(clocked_team, fake_clock, seconds=45)
    [result] = run.tool_results(LIAISON, "sessions_send")
    assert outcome_of(result) is None and "Logs are clean." in str(result.content)
    assert "retried_at" in run.request("ask_1") and "timed_out_at" not in run.request("ask_1")
    assert len(run.notices(R1, notices.RETRY_REMINDER)) == 1


def test_a_call_that_times_out_after_its_retry_notifies_the_master(clocked_team, fake_clock):
    """Collaboration spec §5.1: the retry times out too → the caller gets the time-out and the master is notified."""
    run = _send_run(clocked_team, fake_clock, seconds=40, slow_steps=2)
    [result] = run.tool_results(LIAISON, "sessions_send")
    assert outcome_of(result) == "timed_out"
    # NOTE: timed out at 40 s (deadline 30 s), retried until 70 s, released at the next pass (80 s)
    assert run.request("ask_1")["timed_out_at"] == "2030-01-01T09:01:20+00:00"
    [told] = run.notices(LEADER, notices.COMMUNICATION_FAILED)
    assert LIAISON in told and R1 in told and "ask_1" in told


def test_the_retry_stage_is_configurable(clocked_team, fake_clock):
    """Collaboration spec §5.1 stages are Policy fields: no retry wait, no master notice."""
    run = _send_run(clocked_team, fake_clock, seconds=45, policy=Policy(timeout_retry_wait=0, notify_master=False))
    assert outcome_of(run.tool_results(LIAISON, "sessions_send")[0]) == "timed_out"
    assert run.notices(R1, notices.RETRY_REMINDER) == [] and run.notices(LEADER, notices.COMMUNICATION_FAILED) == []


def _broken_team(tmp_path, attempts: list[str], policy: Policy | None = None) -> Team:
    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        attempts.append(url)
        raise ConnectionError("connection refused")

    instruct = act(call("send_message_to_sub_agent", display_name=UI, message="Skip the fetch; write notes.md."))
    script = {
        LEADER: [
            act(call("create_sub_agent", role_id="ui-operator", task="Fetch the page.")),
            *[on_message({"failed after its retry": instruct})] * 6,
        ],
        UI: [act(call("fetch", url="down")), act(call("write_file", path="notes.md", content="x")), *["Done."] * 3],
    }
    return Team(
        model=ScriptedChatModel(script), home=tmp_path / "home", tools=[fetch], clock=FakeClock(), policy=policy
    )


def test_a_failed_tool_notifies_the_master_and_the_member_waits_for_instructions(tmp_path):
    """Collaboration spec §5.1 (tool fails after its retry → notify the master) and §5.2 (the escalated agent waits)."""
    attempts: list[str] = []
    team = _broken_team(tmp_path, attempts)
    team.compile().invoke({"messages": [("user", "Go")]}, CONFIG)
    assert attempts == ["down", "down"]  # NOTE: transient: retried once
    history = team.history(CONFIG, UI)
    kinds = [_kind(m) for m in history]
    # it stopped after the failure, and went on only after the leader's instruction
    assert kinds.index("stopped") < kinds.index("instruction") < kinds.index("write_file")
    assert len([m for m in team.history(CONFIG, LEADER) if "failed after its retry" in str(m.content)]) == 1
    assert team.agents(CONFIG)[UI]["status"] == "idle"


def _kind(message) -> str:
    if message.additional_kwargs.get("teamgraph_envelope") == "notice:stopped":
        return "stopped"
    if "Skip the fetch" in str(message.content) and message.type == "human":
        return "instruction"
    calls = getattr(message, "tool_calls", None) or []
    return calls[0]["name"] if calls else message.type


def test_without_escalation_waits_the_member_works_on(tmp_path):
    """Collaboration spec §5.2 is a Policy field: ``escalation_waits=False`` lets the member go on after a failure."""
    team = _broken_team(tmp_path, [], policy=Policy(escalation_waits=False))
    team.compile().invoke({"messages": [("user", "Go")]}, CONFIG)
    kinds = [_kind(m) for m in team.history(CONFIG, UI)]
    assert "stopped" not in kinds and kinds.index("write_file") == kinds.index("fetch") + 2  # right after its result


def test_non_transient_errors_tell_the_agent_what_to_do(tmp_path):
    """Collaboration spec §5.1: tool missing → its tools; bad arguments → the schema; no permission → who may."""
    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Work.")), *quiet()],
        R1: [
            act(call("no_such_tool")),
            act(call("write_file", path="a.md")),
            act(call("run_command", command="ls")),
            act(call("read_skill", name="missing-skill")),
            "Done.",
        ],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path / "home", clock=FakeClock())
    team.compile().invoke({"messages": [("user", "Go")]}, CONFIG)
    missing, bad, denied, skill = [m for m in team.history(CONFIG, R1) if m.type == "tool"]
    assert error_of(missing) == errors.UNKNOWN_TOOL and "read_file" in str(missing.content)
    assert error_of(bad) == errors.INVALID_CALL and "content" in str(bad.content)
    assert error_of(denied) in (errors.FORBIDDEN, errors.UNKNOWN_TOOL) and "run_command" in str(denied.content)
    assert error_of(skill) == errors.UNKNOWN_SKILL and "without the skill" in str(skill.content)
