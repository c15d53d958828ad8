"""Chat models for teams: strings and environment to ChatOpenAI, and a scripted model."""

from teamgraph.models.factory import ModelNotConfiguredError, resolve_model
from teamgraph.models.scripted import ScriptedChatModel, ScriptExhaustedError

__all__ = [
    "ModelNotConfiguredError",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "resolve_model",
]
