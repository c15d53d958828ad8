"""The skill store: Anthropic Agent Skills files, ``<home>/skills/<name>/SKILL.md``.

A skill is Markdown with YAML front matter (``name``, ``description``, optional
``risk: normal|high``); the body holds the instructions. Skills written for
Anthropic's Agent Skills can be dropped into the folder as they are: unknown
front-matter keys (``license``, ``allowed-tools``...) are kept. Agents see a
skill's name and description in their prompt and read the body on demand.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Literal, TypedDict

import yaml

SKILLS_DIR = "skills"
SKILL_FILE = "SKILL.md"
RISKS = ("normal", "high")
Risk = Literal["normal", "high"]
# NOTE: Agent Skills names are lowercase letters, digits and hyphens (at most 64).
SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_DESCRIPTION = 1024


class SkillSummary(TypedDict):
    """What an endowed agent sees of a skill in its prompt."""

    name: str
    description: str


class Skill(SkillSummary):
    """A whole skill: its summary, risk, other front matter and body."""

    risk: str
    meta: dict[str, Any]
    body: str


class SkillError(ValueError):
    """A skill name, file or field that cannot be used (the message says how to fix it)."""


def skills_root(home: Path) -> Path:
    """``<home>/skills``."""
    return Path(home) / SKILLS_DIR


def check_name(name: str) -> str:
    """``name`` if it is a valid skill name, else a SkillError."""
    if not SKILL_NAME.fullmatch(name or ""):
        raise SkillError(
            f"'{name}' is not a valid skill name: use lowercase letters, digits and '-' (at most 64), "
            "e.g. 'write-release-notes'."
        )
    return name


def skill_path(home: Path, name: str) -> Path:
    """Where skill ``name`` lives."""
    return skills_root(home) / check_name(name) / SKILL_FILE


def parse_skill(text: str, *, where: str) -> Skill:
    """Parse SKILL.md text (front matter between ``---`` lines, then the body)."""
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in [line.strip() for line in lines[1:]]:
        raise SkillError(f"{where}: a skill starts with '---', YAML front matter (name, description), '---'.")
    end = 1 + [line.strip() for line in lines[1:]].index("---")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        raise SkillError(f"{where}: invalid YAML front matter ({exc}).") from None
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("description"):
        raise SkillError(f"{where}: the front matter needs 'name' and 'description'.")
    risk = str(meta.get("risk", "normal"))
    if risk not in RISKS:
        raise SkillError(f"{where}: risk '{risk}' is not allowed (allowed: {', '.join(RISKS)}).")
    rest = {k: v for k, v in meta.items() if k not in ("name", "description", "risk")}
    body = "\n".join(lines[end + 1 :]).strip()
    return Skill(name=str(meta["name"]), description=str(meta["description"]), risk=risk, meta=rest, body=body)


def format_skill(skill: Skill) -> str:
    """SKILL.md text for ``skill`` (the inverse of ``parse_skill``)."""
    meta = {"name": skill["name"], "description": skill["description"], **skill["meta"]}
    if skill["risk"] != "normal":
        meta["risk"] = skill["risk"]
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=10_000)
    return f"---\n{front}---\n\n{skill['body']}\n"


def read_skill(home: Path, name: str) -> Skill:
    """Read skill ``name``, or a SkillError that lists the skills there are."""
    path = skill_path(home, name)
    if not path.is_file():
        names = ", ".join(s["name"] for s in list_skills(home)) or "none"
        raise SkillError(f"No skill '{name}'. Skills: {names}.")
    return parse_skill(path.read_text(encoding="utf-8"), where=str(path))


def list_skills(home: Path) -> list[Skill]:
    """Every readable skill, by name (a broken file is skipped, not fatal)."""
    root = skills_root(home)
    found = []
    for path in sorted(root.glob(f"*/{SKILL_FILE}")) if root.is_dir() else []:
        try:
            found.append(parse_skill(path.read_text(encoding="utf-8"), where=str(path)))
        except (SkillError, OSError, UnicodeDecodeError):
            continue
    return found


def write_skill(home: Path, skill: Skill) -> Path:
    """Write ``skill`` to its SKILL.md (replacing it), after checking its fields."""
    check_name(skill["name"])
    if not skill["description"].strip() or len(skill["description"]) > MAX_DESCRIPTION:
        raise SkillError(f"A skill needs a description of 1-{MAX_DESCRIPTION} characters: when to use it.")
    if skill["risk"] not in RISKS:
        raise SkillError(f"risk '{skill['risk']}' is not allowed (allowed: {', '.join(RISKS)}).")
    path = skill_path(home, skill["name"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_skill(skill), encoding="utf-8")
    return path


def delete_skill(home: Path, name: str) -> None:
    """Delete skill ``name``'s folder (a SkillError if there is none)."""
    read_skill(home, name)
    shutil.rmtree(skill_path(home, name).parent)


def summary(skill: Skill) -> SkillSummary:
    """The part of a skill an agent's prompt shows."""
    return SkillSummary(name=skill["name"], description=skill["description"])
