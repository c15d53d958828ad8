"""A team's parts from the command-line options.

The model spec (``--model`` or $TEAMGRAPH_MODEL, checked up front), the Policy
(the CLI's defaults, a saved policy, ``--no-plan`` and ``--policy KEY=VALUE``), and
a read-only team for commands that only read threads.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from teamgraph.cli.errors import EXIT_NO_MODEL, CLIError, error_text
from teamgraph.cli.threads import chosen_db
from teamgraph.models.factory import ENV_VAR as MODEL_ENV


def model_spec(model: str | None) -> str:
    """The model spec from --model or the environment; fails with the setup help."""
    from teamgraph.models import ModelNotConfiguredError, resolve_model

    spec = (model or os.environ.get(MODEL_ENV, "")).strip()
    if not spec:
        raise ModelNotConfiguredError()
    try:
        resolve_model(spec)  # fail now, in one line, if the spec or its credentials are wrong
    except (ValueError, TypeError) as exc:
        raise CLIError(error_text(exc)[0], EXIT_NO_MODEL) from None
    return spec


def make_policy(*, base: Mapping[str, Any] | None = None, no_plan: bool = False, settings: Iterable[str] | None = None):
    """A Policy from the CLI's defaults, ``base`` (saved or the demo's), and the flags.

    The CLI makes the Team Leader get its plan approved first (``require_plan``)
    unless ``--no-plan``, which also lets a plan the leader proposes anyway pass
    without asking you (``plan="leader"``); fields of ``base`` the Policy lacks are skipped.
    """
    from teamgraph.policy import Policy

    fields = Policy.model_fields
    values: dict[str, Any] = {"require_plan": True}
    values.update({k: v for k, v in (base or {}).items() if k in fields})
    if no_plan:
        values.update(require_plan=False, plan="leader")
    for item in settings or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CLIError(f"--policy takes KEY=VALUE, got {item!r}.")
        if key not in fields:
            raise CLIError(f"Unknown policy setting {key!r}. Settings: {', '.join(fields)}.")
        try:
            values[key] = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            values[key] = raw
    return Policy(**values)


def reader_team(home: Path, roles_dir: Path | None = None):
    """A team that only reads threads: its model is never called."""
    from teamgraph.models import ScriptedChatModel
    from teamgraph.team import Team

    return Team(model=ScriptedChatModel({}), home=home, roles_dir=roles_dir, checkpointer=chosen_db())


def on_chosen_db(team: Any) -> Any:
    """``team`` (not compiled yet) set to save its threads in ``--db``'s database, if one was given."""
    db = chosen_db()
    if db:
        team._checkpointer = db  # noqa: SLF001 - Team reads it at compile time
    return team
