"""The LangGraph internals teamgraph relies on, in one place.

These names live in ``langgraph._internal``, which carries no stability promise.
Each import is guarded the way LangGraph's own prebuilt ``ToolNode`` guards its
private imports: a release that moves the name falls back to the config key's
value in the releases we test (langgraph 1.2.x). ``pyproject.toml`` pins
``langgraph`` below its next minor version, and ``tests/test_compat.py`` checks
both the values and the fallback, so a moved or renamed key fails a test rather
than a run.
"""

from __future__ import annotations

__all__ = ["CONFIG_KEY_CHECKPOINTER", "CONFIG_KEY_DURABILITY", "CONFIG_KEY_READ_STATE"]

try:
    # NOTE: a node started by `Send` gets only its payload; this key reads the graph state (as ToolNode does).
    from langgraph._internal._constants import CONFIG_KEY_READ_STATE
except ImportError:  # NOTE: its value in langgraph 1.2.x
    CONFIG_KEY_READ_STATE = "__pregel_read_state"

try:
    # NOTE: a subgraph inherits the parent's checkpointer; None here keeps a role subgraph from saving its history.
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER
except ImportError:  # NOTE: its value in langgraph 1.2.x
    CONFIG_KEY_CHECKPOINTER = "__pregel_checkpointer"

try:
    # NOTE: a compiled graph has no default durability (only the per-call `durability=`); this key sets one.
    from langgraph._internal._constants import CONFIG_KEY_DURABILITY
except ImportError:  # NOTE: its value in langgraph 1.2.x
    CONFIG_KEY_DURABILITY = "__pregel_durability"
