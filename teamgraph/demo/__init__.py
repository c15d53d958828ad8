"""The bundled demo: a scripted team that runs offline (`teamgraph demo`).

The script (``demo.yaml``) plays a Team Leader who creates three members (two
UI Operators and a Full-Stack Engineer), answers one member's question, lets
two members talk to each other, and reports. No LLM, no network.
"""

from teamgraph.demo.runner import (
    DEMO_SCRIPT,
    DEMO_TASK,
    demo_team,
    new_thread_id,
    run_demo,
)

__all__ = ["DEMO_SCRIPT", "DEMO_TASK", "demo_team", "new_thread_id", "run_demo"]
