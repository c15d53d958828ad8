"""File tools beyond read/write (issue 33): ``edit_file``, versions, notices, rollback.

Seed 001 gives the leader "file read/write" and its prompt names ``edit_file``;
seed 000 §2.2 keeps project files under ``project/{project_name}/`` for every role.
"""

from __future__ import annotations

import pytest
from tools_fixtures import context_for, run

from teamgraph.policy import Policy
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import errors, tools_for_role
from teamgraph.tools.errors import ToolError
from teamgraph.tools.files import edit_file, write_file

THREAD = {"configurable": {"thread_id": "t-1"}}


@pytest.fixture
def runtime(tmp_path) -> TeamRuntime:
    return TeamRuntime(home=tmp_path, policy=Policy())


def _refused(tool_, context, **args) -> ToolError:
    with pytest.raises(ToolError) as caught:
        run(tool_, context, **args)
    return caught.value


def test_edit_file_replaces_one_exact_match(runtime):
    """Seed 001 (the leader's prompt names edit_file): one exact replacement in a project file."""
    context = context_for(runtime, config=THREAD)
    run(write_file, context, path="web/app.js", content="const colour = 'red';\n")
    run(edit_file, context, path="web/app.js", old_text="'red'", new_text="'blue'")
    assert (runtime.project_dir / "t-1" / "web" / "app.js").read_text() == "const colour = 'blue';\n"


@pytest.mark.parametrize(("old_text", "count"), [("'green'", 0), ("a ", 2)])
def test_edit_file_refuses_a_missing_or_ambiguous_match_and_changes_nothing(runtime, old_text, count):
    """Seed 000 §5.1 (a tool error tells the agent what to fix): the error names the file and the count."""
    context = context_for(runtime, config=THREAD)
    run(write_file, context, path="notes.md", content="a cat, a dog")
    error = _refused(edit_file, context, path="notes.md", old_text=old_text, new_text="x")
    assert error.code == errors.NO_MATCH
    assert "notes.md" in str(error) and f"{count} times" in str(error)
    assert (runtime.project_dir / "t-1" / "notes.md").read_text() == "a cat, a dog"


def test_edit_file_of_a_missing_file_or_an_outside_path_is_refused(runtime):
    """Seed 000 §2.2: files live in the thread's project folder, nowhere else."""
    context = context_for(runtime, config=THREAD)
    assert _refused(edit_file, context, path="nope.md", old_text="a", new_text="b").code == errors.UNKNOWN_PATH
    assert _refused(edit_file, context, path="../x.md", old_text="a", new_text="b").code == errors.FORBIDDEN
    run(write_file, context, path="n.md", content="abc")
    assert _refused(edit_file, context, path="n.md", old_text="", new_text="b").code == errors.BAD_ARGUMENT


def test_every_role_with_file_tools_can_edit(runtime):
    """Seed 001 (the leader's full toolset) and seed 002 (roles pick tool sets): files include edit_file."""
    with_files = [role for role in runtime.roles.values() if "files" in role.tools]
    assert with_files and any(role.is_leader for role in with_files)
    for role in with_files:
        assert "edit_file" in {t.name for t in tools_for_role(runtime, role)}, role.id
