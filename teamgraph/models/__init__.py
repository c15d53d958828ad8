"""Chat models for teams: specs to chat models (any provider), and a scripted model."""

from teamgraph.models.factory import (
    THINKING_SETTINGS,
    ModelNotConfiguredError,
    ModelPackageMissingError,
    UnconfiguredChatModel,
    resolve_model,
)
from teamgraph.models.scripted import ScriptedChatModel, ScriptExhaustedError

__all__ = [
    "THINKING_SETTINGS",
    "ModelNotConfiguredError",
    "ModelPackageMissingError",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "UnconfiguredChatModel",
    "resolve_model",
]
