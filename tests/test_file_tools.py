"""File tools beyond read/write (issue 33): ``edit_file``, versions, notices, rollback.

Leader spec gives the leader "file read/write" and its prompt names ``edit_file``;
collaboration spec §2.2 keeps project files under ``project/{project_name}/`` for every role.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from langgraph.types import Command
from scripting import act, call
from tools_fixtures import R1, R2, context_for, effects_of, run

from teamgraph import ScriptedChatModel, Team
from teamgraph.messaging.results import error_of
from teamgraph.policy import Policy
from teamgraph.records import LEADER
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import errors, tools_for_role
from teamgraph.tools.context import ToolContext
from teamgraph.tools.errors import ToolError
from teamgraph.tools.files import edit_file, file_versions, list_files, read_file, restore_file, write_file

THREAD = {"configurable": {"thread_id": "t-1"}}


@pytest.fixture
def runtime(tmp_path) -> TeamRuntime:
    return TeamRuntime(home=tmp_path, policy=Policy())


def _refused(tool_, context, **args) -> ToolError:
    with pytest.raises(ToolError) as caught:
        run(tool_, context, **args)
    return caught.value


def test_edit_file_replaces_one_exact_match(runtime):
    """Leader spec (the leader's prompt names edit_file): one exact replacement in a project file."""
    wrote = run(write_file, _as(runtime, LEADER, "c1"), path="web/app.js", content="const colour = 'red';\n")
    run(edit_file, _as(runtime, LEADER, "c2", wrote), path="web/app.js", old_text="'red'", new_text="'blue'")
    assert (runtime.project_dir / "t-1" / "web" / "app.js").read_text() == "const colour = 'blue';\n"


@pytest.mark.parametrize(("old_text", "count"), [("'green'", 0), ("a ", 2)])
def test_edit_file_refuses_a_missing_or_ambiguous_match_and_changes_nothing(runtime, old_text, count):
    """Collaboration spec §5.1 (a tool error tells the agent what to fix): the error names the file and the count."""
    wrote = run(write_file, _as(runtime, LEADER, "c1"), path="notes.md", content="a cat, a dog")
    error = _refused(edit_file, _as(runtime, LEADER, "c2", wrote), path="notes.md", old_text=old_text, new_text="x")
    assert error.code == errors.NO_MATCH
    assert "notes.md" in str(error) and f"{count} times" in str(error)
    assert (runtime.project_dir / "t-1" / "notes.md").read_text() == "a cat, a dog"


def test_edit_file_of_a_missing_file_or_an_outside_path_is_refused(runtime):
    """Collaboration spec §2.2: files live in the thread's project folder, nowhere else."""
    context = _as(runtime, LEADER, "c1")
    assert _refused(edit_file, context, path="nope.md", old_text="a", new_text="b").code == errors.UNKNOWN_PATH
    assert _refused(edit_file, context, path="../x.md", old_text="a", new_text="b").code == errors.FORBIDDEN
    wrote = run(write_file, context, path="n.md", content="abc")
    empty = _refused(edit_file, _as(runtime, LEADER, "c2", wrote), path="n.md", old_text="", new_text="b")
    assert empty.code == errors.BAD_ARGUMENT


def test_every_role_with_file_tools_can_edit(runtime):
    """Leader spec (the leader's full toolset) and architecture spec (roles pick tool sets): files include edit_file."""
    with_files = [role for role in runtime.roles.values() if "files" in role.tools]
    assert with_files and any(role.is_leader for role in with_files)
    for role in with_files:
        assert "edit_file" in {t.name for t in tools_for_role(runtime, role)}, role.id


# --- versions (collaboration spec §2.2 shared files, §5.1 roll back to a stable version) ---


def _as(runtime, caller: str, call_id: str, *earlier: Command) -> ToolContext:
    """A context for ``caller``'s call ``call_id``, after the ``earlier`` calls of the same step."""
    done = [e for out in earlier for e in effects_of(out)]
    return replace(context_for(runtime, caller, config=THREAD, effects=done), tool_call_id=call_id)


def test_a_write_based_on_an_older_version_is_refused_naming_the_writer(runtime):
    """Collaboration spec §2.2: a file changed since you saw it is not overwritten; you are told how to merge."""
    wrote = run(write_file, _as(runtime, R1, "a1"), path="shared.md", content="one")
    assert effects_of(wrote) == [{"kind": "file", "path": "shared.md", "version": 1, "action": "write"}]
    stale = _refused(write_file, _as(runtime, R2, "b1"), path="shared.md", content="two")
    assert stale.code == errors.STALE_VERSION and R1 in str(stale) and "read_file" in str(stale)
    assert _refused(edit_file, _as(runtime, R2, "b2"), path="shared.md", old_text="one", new_text="2").code == (
        errors.STALE_VERSION
    )
    assert (runtime.project_dir / "t-1" / "shared.md").read_text() == "one"
    read = run(read_file, _as(runtime, R2, "b3"), path="shared.md")
    run(write_file, _as(runtime, R2, "b4", read), path="shared.md", content="one\ntwo")
    assert (runtime.project_dir / "t-1" / "shared.md").read_text() == "one\ntwo"


def test_a_call_re_run_after_a_crash_makes_no_second_version(runtime):
    """Collaboration spec §5 (recovery), §2.2: a re-run of the same call finds its version, writes no other."""
    first = run(write_file, _as(runtime, R1, "a1"), path="n.md", content="x")
    again = run(write_file, _as(runtime, R1, "a1"), path="n.md", content="x")
    assert effects_of(first) == effects_of(again)
    assert "version 1: write by" in run(file_versions, _as(runtime, R1, "a2"), path="n.md")
    lost = run(write_file, _as(runtime, R1, "a3"), path="n.md", content="y")  # NOTE: its own step was lost
    assert effects_of(lost)[0]["version"] == 2


def test_restore_file_rolls_back_to_an_earlier_version(runtime):
    """Collaboration spec §5.1 (data inconsistency → roll back to a stable version): restore makes a new version."""
    one = run(write_file, _as(runtime, R1, "a1"), path="api.py", content="stable")
    two = run(edit_file, _as(runtime, R1, "a2", one), path="api.py", old_text="stable", new_text="broken")
    restored = run(restore_file, _as(runtime, R2, "b1"), path="api.py", version=1)
    assert effects_of(two)[0]["version"] == 2
    assert effects_of(restored) == [{"kind": "file", "path": "api.py", "version": 3, "action": "restore"}]
    assert (runtime.project_dir / "t-1" / "api.py").read_text() == "stable"
    listing = run(file_versions, _as(runtime, R1, "a3"), path="api.py")
    assert [line.split(":")[0] for line in listing.splitlines()[:3]] == ["version 1", "version 2", "version 3"]
    assert _refused(restore_file, _as(runtime, R1, "a4"), path="api.py", version=9).code == errors.UNKNOWN_PATH


def test_the_versions_folder_is_neither_listed_nor_touched(runtime):
    """Collaboration spec §2.2: the project folder shows the project's files only."""
    run(write_file, _as(runtime, R1, "a1"), path="n.md", content="x")
    assert run(list_files, _as(runtime, R1, "a2")) == "n.md"
    hidden = _refused(read_file, _as(runtime, R1, "a3"), path=".versions/n.md/1.json")
    assert hidden.code == errors.FORBIDDEN


def test_readers_are_told_when_another_agent_changes_a_file(make_team):
    """Collaboration spec §2.2: an agent that read a file gets a file_changed notice when another agent writes it."""
    script = {
        LEADER: [
            act(call("write_file", path="plan.md", content="v1")),
            act(call("create_sub_agent", role_id="researcher", task="Read plan.md, then wait.")),
            *[""] * 2,
            act(call("read_file", path="plan.md")),
            "Done.",
        ],
        R1: [
            act(call("read_file", path="plan.md")),
            act(call("edit_file", path="plan.md", old_text="v1", new_text="v2")),
            "Edited.",
        ],
    }
    run = make_team(script)
    run.send("Go")
    [notice] = run.notices(LEADER, "file_changed")
    assert R1 in notice and "plan.md" in notice
    record = run.values["team"]["files"]["plan.md"]
    assert (record["version"], record["by"], record["seen"]) == (2, R1, {LEADER: 2, R1: 2})
    reopened = Team(model=ScriptedChatModel({}), home=run.team.home)  # NOTE: a new process after a crash
    assert reopened.state(run.config)["team"]["files"]["plan.md"]["version"] == 2


def test_call_agent_files_resolve_in_the_threads_folder(make_team):
    """Collaboration spec §2.2 (``files`` of a collaboration message): the receiver reads the path it was given."""
    pm, r1 = "Project Manager_1", R1
    script = {
        LEADER: [
            act(
                call("write_file", path="notes/brief.md", content="the brief"),
                call("create_sub_agent", role_id="project-manager", task="Have the researcher read the brief."),
                call("create_sub_agent", role_id="researcher"),
            ),
            *[""] * 4,
        ],
        pm: [
            act(call("call_agent", receiver=r1, content="Read it.", project_name="launch", files=["notes/brief.md"])),
            "Read.",
        ],
        r1: [lambda messages: act(call("read_file", path=_given_file(messages))), "It says: the brief."],
    }
    run = make_team(script)
    run.send("Go")
    [result] = run.tool_results(r1, "read_file")
    assert error_of(result) is None and result.content == "the brief"


def _given_file(messages) -> str:
    envelope = next(str(m.content) for m in messages if "files: " in str(m.content))
    return envelope.split("files: ")[1].split(" ")[0]
