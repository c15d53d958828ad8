"""The exception policy: retry once, escalate repeated file failures and time-outs, stop loops."""

from __future__ import annotations

from audit_fixtures import CONFIG, log_lines
from conftest import FakeClock
from langchain_core.tools import tool
from scripting import act, after_seconds, call, chunks, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.audit import flush_log, parse_line
from teamgraph.audit.exceptions import RETRIES_KEY, is_transient
from teamgraph.messaging.results import error_of, outcome_of
from teamgraph.tools import errors

LEADER = "Team Leader"
UI = "UI Operator_1"
CREATE_UI = act(call("create_sub_agent", role_id="ui-operator", task="Do the work."))


def _fetch_tool(attempts: list[str]):
    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        attempts.append(url)
        if url == "flaky" and attempts.count("flaky") == 1:
            raise TimeoutError("read timed out")
        if url == "down":
            raise ConnectionError("connection refused")
        if url == "bug":
            raise ValueError("bad url")
        return f"content of {url}"

    return fetch


def _fetch_team(tmp_path, attempts, policy=None) -> Team:
    script = {
        LEADER: [CREATE_UI, *quiet()],
        UI: [act(call("fetch", url="flaky")), act(call("fetch", url="down")), act(call("fetch", url="bug")), "Done."],
    }
    return Team(
        model=ScriptedChatModel(script),
        home=tmp_path / "home",
        tools=[_fetch_tool(attempts)],
        clock=FakeClock(),
        # NOTE: the member goes on after each failure here; escalation is tested on its own
        policy=policy or Policy(escalation_waits=False),
    )


def _results(team: Team, name: str) -> list:
    return [m for m in team.history(CONFIG, name) if m.type == "tool"]


def test_a_transient_tool_failure_is_retried_once_then_the_agent_is_told_to_go_another_way(tmp_path):
    attempts: list[str] = []
    team = _fetch_team(tmp_path, attempts)
    team.compile().invoke({"messages": [("user", "Go")]}, CONFIG)

    assert attempts == ["flaky", "flaky", "down", "down", "bug"]  # the ValueError is not transient: no retry
    flaky, down, bug = _results(team, UI)
    assert (flaky.status, flaky.content) == ("success", "content of flaky")
    assert flaky.additional_kwargs[RETRIES_KEY] == ["TimeoutError: read timed out"]
    assert (down.status, error_of(down)) == ("error", errors.TOOL_FAILED)
    assert (bug.status, error_of(bug)) == ("error", errors.TOOL_FAILED) and RETRIES_KEY not in bug.additional_kwargs

    flush_log(team, CONFIG)
    events = {e.content.split(")")[0]: e for e in map(parse_line, log_lines(team.home))}
    assert (events["fetch(url=flaky"].result, events["fetch(url=flaky"].level, events["fetch(url=flaky"].code) == (
        "success",
        "WARN",
        "RETRY",
    )
    assert (events["fetch(url=down"].result, events["fetch(url=down"].level) == ("failed", "ERROR")


def test_tool_retries_zero_turns_retries_off(tmp_path):
    attempts: list[str] = []
    team = _fetch_team(tmp_path, attempts, policy=Policy(tool_retries=0, escalation_waits=False))
    team.compile().invoke({"messages": [("user", "Go")]}, CONFIG)
    assert attempts == ["flaky", "down", "bug"]
    assert _results(team, UI)[0].status == "error"


def test_what_is_transient():
    assert is_transient(TimeoutError()) and is_transient(ConnectionResetError())
    assert not is_transient(ValueError()) and not is_transient(PermissionError())


def _notices(run, name: str, text: str) -> list[str]:
    return [c for c in chunks(run, name) if text in c]


def _codes(run) -> list[str]:
    """The exception-policy codes in the run's collaboration log."""
    flush_log(run.team, run.config)
    project = run.config["configurable"]["thread_id"]
    lines = log_lines(run.team.home, project)
    return [e.code for e in map(parse_line, lines) if e.content.startswith("exception policy")]


def test_three_failed_file_operations_in_a_row_notify_the_leader_once(make_team):
    run = make_team(
        {
            LEADER: [CREATE_UI, *quiet()],
            UI: [
                act(call("read_file", path="a.txt")),
                act(call("read_file", path="b.txt")),
                act(call("write_file", path="../x.txt", content="x")),
                act(call("read_file", path="c.txt")),
                "Could not read the files.",
            ],
        }
    )
    run.send("Go")
    told = _notices(run, LEADER, "file operations failed in a row")
    assert len(told) == 1 and told[0].startswith(f"Message from {UI}")
    assert _codes(run) == ["FILE_FAILURES"]


def test_a_successful_file_operation_resets_the_count(make_team):
    run = make_team(
        {
            LEADER: [CREATE_UI, *quiet()],
            UI: [
                act(call("read_file", path="a.txt")),
                act(call("read_file", path="b.txt")),
                act(call("write_file", path="ok.txt", content="x")),
                act(call("read_file", path="c.txt")),
                "Done.",
            ],
        }
    )
    run.send("Go")
    assert not _notices(run, LEADER, "file operations failed in a row")
    assert _codes(run) == []


def test_the_same_call_three_times_warns_five_times_stops_the_turn(make_team):
    seen: list[str] = []

    def fourth(messages):
        seen.append(str(messages[0].content))  # NOTE: the warning is part of this step's system prompt
        return act(call("list_files"))

    run = make_team(
        {
            LEADER: [CREATE_UI, *quiet()],
            UI: [
                act(call("list_files")),
                act(call("list_files")),
                act(call("list_files")),
                fourth,
                act(call("list_files")),
                "never reached",
            ],
        }
    )
    run.send("Go")
    assert "same call 3 times in a row" in seen[0]  # the warning reached the 4th model call
    assert run.ai_count(UI) == 5
    assert run.status(UI) == "stopped"
    told = _notices(run, LEADER, "same call 5 times in a row")
    assert len(told) == 1 and "list_files" in told[0]
    assert _codes(run) == ["LOOP", "LOOP_STOPPED"]


def test_loop_thresholds_are_configurable(make_team):
    run = make_team(
        {LEADER: [CREATE_UI, *quiet()], UI: [act(call("list_files"))] * 3 + ["never reached"]},
        policy=Policy(loop_warn=2, loop_stop=3),
    )
    run.send("Go")
    assert run.ai_count(UI) == 3 and run.status(UI) == "stopped"
    assert _codes(run) == ["LOOP", "LOOP_STOPPED"]


LIAISON, R1, R2 = "Liaison_1", "Researcher_1", "Researcher_2"


def test_two_timed_out_sends_in_a_row_notify_the_leader(clocked_team, fake_clock):
    slow = [after_seconds(fake_clock, 60, turn) for turn in (act(call("list_files")), "Clean.", "Ok.", "Ok.")]
    run = clocked_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="liaison", task="Ask the researchers."),
                    call("create_sub_agent", role_id="researcher"),
                    call("create_sub_agent", role_id="researcher"),
                ),
                *quiet(),
            ],
            LIAISON: [
                act(call("sessions_send", sessionKey=R1, message="Check the logs.", timeoutSeconds=30)),
                act(call("sessions_send", sessionKey=R2, message="Check the metrics.", timeoutSeconds=30)),
                *["REPLY_SKIP"] * 6,
            ],
            # NOTE: every step of a researcher takes a minute: each 30 s send times out.
            R1: slow,
            R2: slow,
        },
        policy=Policy(timeout_retry_wait=0),
    )
    run.send("Go")
    assert [outcome_of(m) for m in run.tool_results(LIAISON, "sessions_send")] == ["timed_out"] * 2
    told = _notices(run, LEADER, "calls timed out in a row")
    assert len(told) == 1 and told[0].startswith(f"Message from {LIAISON}")
    assert _codes(run) == ["SEND_TIMEOUTS"]
