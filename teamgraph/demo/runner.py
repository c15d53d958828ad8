"""Build and run the demo team (used by `teamgraph demo`, and usable from code).

Example:
    ```python
    from teamgraph.demo import run_demo

    team, config = run_demo(home="/tmp/demo-home")
    team.agents(config)        # who did what
    team.history(config, "UI Operator_2")
    ```
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from teamgraph.models import ScriptedChatModel
from teamgraph.policy import Policy
from teamgraph.team import DEFAULT_HOME, Team

DEMO_SCRIPT = Path(__file__).with_name("demo.yaml")
"""The demo's script: every agent's turns, in order."""

DEMO_TASK = (
    "Build a login feature for our web app: a login page, a sign-up page that "
    "looks the same, and the auth API behind them."
)
"""The task the user gives the demo team."""

DEMO_THREAD_PREFIX = "demo"


def new_thread_id(db_path: str | Path, prefix: str = DEMO_THREAD_PREFIX) -> str:
    """A thread id not used yet in ``db_path``: ``<prefix>-<n>``, n one more than the largest.

    The scripted model picks each agent's turn from its conversation, so a demo
    must start on a fresh thread: an old one has used its turns already.
    """
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)$")
    taken = 0
    path = Path(db_path)
    if path.exists():
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
        except sqlite3.Error:
            rows = []
        finally:
            conn.close()
        for (thread_id,) in rows:
            match = pattern.match(str(thread_id))
            if match:
                taken = max(taken, int(match.group(1)))
    return f"{prefix}-{taken + 1}"


def demo_policy() -> Policy:
    """The demo's policy: nobody waits for a person (the script has no plan step)."""
    fields = Policy.model_fields
    settings: dict[str, Any] = {}
    if "require_plan" in fields:
        settings["require_plan"] = False
    return Policy(**settings)


def demo_team(
    home: str | Path = DEFAULT_HOME,
    *,
    roles_dir: str | Path | None = None,
    policy: Policy | None = None,
    latency: float = 0.0,
) -> Team:
    """The demo team: the scripted model on ``demo.yaml``, SQLite in ``home``.

    ``latency`` (seconds per model call) imitates a real model, so a person
    watching the live view sees the members work in parallel.
    """
    return Team(
        model=ScriptedChatModel(str(DEMO_SCRIPT), latency=latency),
        roles_dir=roles_dir,
        policy=policy or demo_policy(),
        home=home,
    )


def run_demo(home: str | Path = DEFAULT_HOME, *, thread_id: str | None = None) -> tuple[Team, RunnableConfig]:
    """Run the demo to its end (no live view) and return the team and the thread's config."""
    team = demo_team(home)
    graph = team.compile()
    config: RunnableConfig = {"configurable": {"thread_id": thread_id or new_thread_id(team.db_path)}}
    graph.invoke({"messages": [("user", DEMO_TASK)]}, config)
    return team, config
