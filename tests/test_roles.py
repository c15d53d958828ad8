"""Tests for teamgraph.roles: the role model, role files and the built-in roles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from teamgraph.roles import (
    LEADER_ROLE_ID,
    TOOL_SETS,
    Role,
    RoleFileError,
    builtin_roles_dir,
    load_roles,
    parse_role_file,
    parse_role_text,
    write_role_file,
)

BUILTIN_NAMES = {
    "team-leader": "Team Leader",
    "ui-operator": "UI Operator",
    "full-stack-engineer": "Full-Stack Engineer",
    "code-reviewer": "Code Reviewer",
    "researcher": "Researcher",
    "project-manager": "Project Manager",
    "hr-manager": "HR Manager",
    "task-manager": "Task Manager",
    "skill-teacher": "Skill Teacher",
    "tool-maker": "Tool Maker",
}
BUILTIN_LEVELS = {
    "team-leader": "L1",
    "project-manager": "L2",
    "hr-manager": "L2",
    "task-manager": "L3",
    "skill-teacher": "L3",
    "tool-maker": "L3",
}


def role_text(front_matter: str, body: str = "You help.") -> str:
    return f"---\n{front_matter}\n---\n\n{body}\n"


def write(directory: Path, filename: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    path.write_text(text, encoding="utf-8")
    return path


# --- built-in roles ----------------------------------------------------------------


def test_builtin_roles_have_the_expected_ids_and_names():
    roles = load_roles()

    assert {role_id: role.name for role_id, role in roles.items()} == BUILTIN_NAMES
    assert next(iter(roles)) == LEADER_ROLE_ID


def test_builtin_roles_are_complete():
    for role_id, role in load_roles().items():
        assert role.id == role_id
        assert role.source == "builtin"
        assert role.level == BUILTIN_LEVELS.get(role_id, "L4"), role_id
        assert role.description.endswith("."), role_id
        assert role.prompt, role_id
        assert not re.search(r"[\u4e00-\u9fff]", role.prompt), f"{role_id} prompt is not English"
        if role.is_leader:
            assert role.thinking_mode == "deep"
            assert role.tools == (
                "leader",
                "files",
                "protocols",
                "collaboration",
                "sessions",
                "skills",
                "skill_admin",
                "tasks",
                "admin",
                "commands",
                "memory",
                "search",
            )
        else:
            assert role.tools[:2] == ("member", "files"), role_id
            assert "skills" in role.tools, role_id
            assert set(role.tools) <= {
                "member",
                "files",
                "protocols",
                "collaboration",
                "sessions",
                "skills",
                "skill_admin",
                "tasks",
                "admin",
                "commands",
                "tool_admin",
                "agent_info",
            }, role_id
            # The sessions spec gives its tools to every agent.
            assert "sessions" in role.tools, role_id
            assert 10 <= len(role.prompt.splitlines()) <= 25, role_id


def test_builtin_files_are_named_after_their_ids():
    stems = sorted(path.stem for path in builtin_roles_dir().glob("*.md"))
    assert stems == sorted(BUILTIN_NAMES)


# --- custom folders ----------------------------------------------------------------


def test_custom_folder_adds_and_overrides_roles(tmp_path):
    added = write(tmp_path, "analyst.md", role_text("id: data-analyst\nname: Data Analyst"))
    write(tmp_path, "reviewer.md", role_text("id: code-reviewer\nname: Strict Reviewer"))

    roles = load_roles(tmp_path)

    assert roles["data-analyst"].source == str(added)
    assert roles["data-analyst"].prompt == "You help."
    assert roles["code-reviewer"].name == "Strict Reviewer"
    assert list(roles)[0] == LEADER_ROLE_ID
    assert list(roles)[-1] == "data-analyst"
    assert len(roles) == len(BUILTIN_NAMES) + 1


def test_later_folder_wins_and_leader_stays_first(tmp_path):
    first = write(tmp_path / "a", "x.md", role_text("id: helper\nname: Helper"))
    second = write(tmp_path / "b", "y.md", role_text("id: helper\nname: Better Helper"))
    write(tmp_path / "b", "lead.md", role_text("id: team-leader\nname: Team Leader", "Boss."))

    roles = load_roles(first.parent, None, tmp_path / "missing", second.parent)

    assert roles["helper"].name == "Better Helper"
    assert roles["helper"].source == str(second)
    assert list(roles)[0] == LEADER_ROLE_ID
    assert roles[LEADER_ROLE_ID].prompt == "Boss."


def test_folder_loading_skips_hidden_and_non_md_files(tmp_path):
    write(tmp_path, ".#draft.md", "not a role")
    write(tmp_path, "notes.txt", "not a role")
    assert set(load_roles(tmp_path)) == set(BUILTIN_NAMES)


def test_a_file_given_as_folder_is_an_error(tmp_path):
    path = write(tmp_path, "role.md", role_text("id: a\nname: A"))
    with pytest.raises(RoleFileError, match="not a folder") as info:
        load_roles(path)
    assert "Fix:" in str(info.value)


def test_duplicate_ids_in_one_folder_name_both_files(tmp_path):
    write(tmp_path, "one.md", role_text("id: twin\nname: Twin"))
    write(tmp_path, "two.md", role_text("id: twin\nname: Other Twin"))

    with pytest.raises(RoleFileError) as info:
        load_roles(tmp_path)

    message = str(info.value)
    assert "one.md" in message and "two.md" in message
    assert info.value.field == "id"
    assert "Fix:" in message


# --- malformed files ---------------------------------------------------------------

MALFORMED = [
    # (case, file text, field, something the message must say)
    ("no-front-matter", "You are a helper.\n", None, "does not start with '---'"),
    ("unterminated", "---\nid: a\nname: A\n\nYou help.\n", None, "never closed"),
    ("bad-yaml", "---\nid: a\nname: [A\n---\n", None, "line 3"),
    ("not-a-mapping", role_text("- id\n- name"), None, "not a mapping"),
    ("missing-id", role_text("name: A"), "id", "is missing"),
    ("missing-name", role_text("id: a"), "name", "is missing"),
    ("unknown-key", role_text("id: a\nname: A\nthinking: deep"), "thinking", "thinking_mode"),
    (
        "bad-thinking-mode",
        role_text("id: a\nname: A\nthinking_mode: slow"),
        "thinking_mode",
        "'slow' is not allowed (allowed: fast, deep). Fix: set thinking_mode to fast or deep.",
    ),
    ("unknown-tool", role_text("id: a\nname: A\ntools: [member, web]"), "tools", "'web'"),
    ("bad-level", role_text("id: a\nname: A\nlevel: L5"), "level", "L1, L2, L3, L4"),
    ("tools-wrong-type", role_text("id: a\nname: A\ntools: 3"), "tools", "expected a list"),
    ("name-wrong-type", role_text("id: a\nname: 42"), "name", "expected text"),
    ("bad-id", role_text("id: UI Operator\nname: A"), "id", "not a valid id"),
    ("name-instance-suffix", role_text("id: a\nname: Worker_2"), "name", "'_<number>'"),
    ("name-reserved", role_text("id: boss\nname: Team Leader"), "name", "reserved"),
]


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_role_files_raise_readable_errors(tmp_path, text, field, expected):
    path = write(tmp_path, "broken-role.md", text)

    with pytest.raises(RoleFileError) as info:
        parse_role_file(path)

    error = info.value
    message = str(error)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    assert "Fix:" in message and error.fix
    assert expected in message
    assert error.field == field
    if field is not None:
        assert f"field '{field}'" in message
    # Raised "from None": no pydantic or YAML traceback attached.
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


def test_unknown_tool_lists_the_valid_tool_sets():
    with pytest.raises(RoleFileError) as info:
        parse_role_text(role_text("id: a\nname: A\ntools: member, web"), source="roles/a.md")
    assert ", ".join(TOOL_SETS) in str(info.value)


def test_unknown_key_lists_allowed_keys():
    with pytest.raises(RoleFileError) as info:
        parse_role_text(role_text("id: a\nname: A\ncolour: red"), source="roles/a.md")
    assert "allowed: id, name, description, model, thinking_mode, tools, level" in str(info.value)
    assert info.value.fix == "remove it."


def test_non_utf8_file_is_an_error(tmp_path):
    path = tmp_path / "latin.md"
    path.write_bytes(role_text("id: a\nname: Caf\xe9").encode("latin-1"))
    with pytest.raises(RoleFileError, match="UTF-8"):
        parse_role_file(path)


# --- parsing details ---------------------------------------------------------------


def test_comma_separated_tools_string():
    role = parse_role_text(role_text("id: a\nname: A\ntools: member, files ,collaboration,"), source="a.md")
    assert role.tools == ("member", "files", "collaboration")


def test_defaults_stem_and_body(tmp_path):
    path = write(tmp_path, "whatever-name.md", role_text("id: a\nname: A", "\n  Line one.\n\n"))

    role = parse_role_file(path)

    assert role.id == "a"
    assert role.prompt == "Line one."
    assert (role.model, role.thinking_mode, role.level) == (None, "fast", "L4")
    assert role.tools == ("member", "files")
    assert not role.is_leader


def test_empty_values_take_the_default():
    role = parse_role_text(role_text("id: a\nname: A\ndescription:\nmodel:\nthinking_mode:"), source="a.md")
    assert (role.description, role.model, role.thinking_mode) == ("", None, "fast")


def test_role_is_frozen():
    role = Role(id="a", name="A")
    with pytest.raises(ValidationError):
        role.name = "B"  # type: ignore[misc]


# --- writing -----------------------------------------------------------------------


def test_write_role_file_round_trips(tmp_path):
    role = Role(
        id="data-analyst",
        name="Data Analyst",
        description="Answers questions: with data, carefully.",
        model="openai:gpt-4o-mini",
        thinking_mode="deep",
        tools=("member", "files", "sessions"),
        level="L3",
        prompt="You analyse data.\n\n---\n\nShow your working.",
    )

    path = write_role_file(tmp_path / "new" / "roles", role)

    assert path == tmp_path / "new" / "roles" / "data-analyst.md"
    assert parse_role_file(path) == role.model_copy(update={"source": str(path)})
    assert [p.name for p in path.parent.iterdir()] == ["data-analyst.md"]  # no temp files


def test_write_role_file_writes_only_non_default_fields(tmp_path):
    path = write_role_file(tmp_path, Role(id="a", name="A", level="L2"))

    text = path.read_text(encoding="utf-8")

    assert text == "---\nid: a\nname: A\ndescription: ''\nlevel: L2\n---\n"
    assert parse_role_file(path).level == "L2"


def test_builtin_roles_round_trip(tmp_path):
    for role in load_roles().values():
        path = write_role_file(tmp_path, role)
        assert parse_role_file(path).model_copy(update={"source": "builtin"}) == role
