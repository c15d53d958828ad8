"""The team graph for LangGraph Studio and the API server (``langgraph dev``).

``langgraph.json`` at the repository root names ``graph`` below. The server
brings its own checkpointer, so the team is compiled without one. The
environment configures the team:

- ``TEAMGRAPH_MODEL``: the model (``openai:<model>`` or ``scripted:<path.yaml>``);
- ``TEAMGRAPH_HOME``: the data folder (custom roles, project files); default
  ``.teamgraph``;
- ``TEAMGRAPH_POLICY``: optional, a JSON object of ``Policy`` fields, e.g.
  ``{"ask": "human", "pause": "immediately"}``.
"""

from __future__ import annotations

import os

from pydantic import ValidationError

from teamgraph.policy import Policy
from teamgraph.team import DEFAULT_HOME, Team

HOME_ENV = "TEAMGRAPH_HOME"
POLICY_ENV = "TEAMGRAPH_POLICY"


def policy_from_env(environ: dict[str, str] | None = None) -> Policy:
    """The ``Policy`` that ``TEAMGRAPH_POLICY`` describes (the default if unset).

    Raises:
        ValueError: The variable is not a JSON object of ``Policy`` fields.
    """
    raw = (environ if environ is not None else os.environ).get(POLICY_ENV, "").strip()
    if not raw:
        return Policy()
    try:
        return Policy.model_validate_json(raw)
    except ValidationError as e:
        fields = ", ".join(Policy.model_fields)
        raise ValueError(
            f"{POLICY_ENV} must be a JSON object of Policy fields ({fields}); "
            f"got {raw!r}:\n{e}"
        ) from e


def build_team(environ: dict[str, str] | None = None) -> Team:
    """The team Studio runs, configured from the environment (model from ``TEAMGRAPH_MODEL``)."""
    env = environ if environ is not None else os.environ
    return Team(
        checkpointer=False,
        home=env.get(HOME_ENV, DEFAULT_HOME),
        policy=policy_from_env(env),
    )


team = build_team()
graph = team.compile()
