"""Turn a model spec into a chat model.

A spec is a `BaseChatModel` (used as is), a string `"openai:<model>"` or
`"scripted:<path.yaml>"`, or `None` to read the `TEAMGRAPH_MODEL` environment
variable. Nothing here touches the network: clients connect on first use.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from langchain_core.language_models import BaseChatModel

from teamgraph.models.scripted import ScriptedChatModel

__all__ = ["ENV_VAR", "ModelNotConfiguredError", "resolve_model"]

ENV_VAR = "TEAMGRAPH_MODEL"

_ACCEPTED = (
    "a chat model object, 'openai:<model>' (e.g. 'openai:gpt-4o-mini') "
    "or 'scripted:<path.yaml>'"
)
# OpenAI models that take `reasoning_effort` instead of a thinking prompt.
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# A few client retries for transient HTTP errors; the graph's RetryPolicy
# handles anything longer, so keep this small to avoid stacked retries.
_MAX_RETRIES = 2
# Role files that leave the model to the team (`model: inherit`, empty).
_NO_ROLE_MODEL = ("", "inherit")


class ModelNotConfiguredError(RuntimeError):
    """No model was given and the environment does not name one."""

    def __init__(self, reason: str = f"{ENV_VAR} is not set.") -> None:
        super().__init__(
            f"No model configured: {reason}\n"
            "Choose one of:\n"
            f"  - {ENV_VAR}=openai:<model> with OPENAI_API_KEY set (and "
            "OPENAI_BASE_URL for any OpenAI-compatible server, e.g. a local one);\n"
            f"  - {ENV_VAR}=scripted:<path.yaml> to replay a scripted team;\n"
            "  - pass model= to Team, e.g. Team(model=\"openai:gpt-4o-mini\");\n"
            "  - or try `teamgraph demo`."
        )


def resolve_model(
    spec: BaseChatModel | str | None = None,
    *,
    role_model: str | None = None,
    thinking_mode: str = "fast",
) -> BaseChatModel:
    """Return the chat model a spec names.

    Args:
        spec: A chat model (returned as is), `"openai:<model>"`,
            `"scripted:<path.yaml>"`, or `None` for `$TEAMGRAPH_MODEL`.
        role_model: A role file's `model:` field. It replaces the model name of
            an OpenAI spec: `"openai:gpt-4o"` or bare `"gpt-4o"`. Scripted and
            object specs ignore it: there the script or the object decides.
        thinking_mode: `"deep"` sets `reasoning_effort="high"` on OpenAI
            reasoning models (o1, o3, o4, gpt-5); other models think through
            their prompt, which is not built here.

    Returns:
        The chat model. Built models are cached per process, so every member
        of a role shares one client.

    Raises:
        ModelNotConfiguredError: No spec and no `TEAMGRAPH_MODEL`, or an OpenAI
            spec with neither `OPENAI_API_KEY` nor `OPENAI_BASE_URL`.
        ValueError: The spec or the role model is not an accepted form.
        TypeError: The spec is neither a chat model, a string nor `None`.
    """
    if isinstance(spec, BaseChatModel):
        return spec
    if spec is None:
        spec = os.environ.get(ENV_VAR, "").strip()
        if not spec:
            raise ModelNotConfiguredError()
    if not isinstance(spec, str):
        raise TypeError(f"A model spec must be {_ACCEPTED}; got {type(spec).__name__}.")

    provider, target = _split(spec)
    if provider == "scripted":
        return _scripted(target)
    if provider == "openai":
        name = _role_model_name(role_model) or target
        return _openai(name, thinking_mode=thinking_mode)
    raise ValueError(f"Unknown model spec {spec!r}: use {_ACCEPTED}.")


def _split(spec: str) -> tuple[str, str]:
    """`"openai:gpt-4o"` -> `("openai", "gpt-4o")`."""
    provider, sep, target = spec.strip().partition(":")
    if not sep or not target.strip():
        raise ValueError(f"Unknown model spec {spec!r}: use {_ACCEPTED}.")
    return provider.strip().lower(), target.strip()


def _role_model_name(role_model: str | None) -> str | None:
    """The OpenAI model name a role asks for, or `None` to keep the team's."""
    if role_model is None or role_model.strip().lower() in _NO_ROLE_MODEL:
        return None
    if ":" not in role_model:
        return role_model.strip()
    provider, name = _split(role_model)
    if provider != "openai":
        raise ValueError(
            f"Role model {role_model!r} names provider {provider!r}, but the team "
            "uses OpenAI: give a bare model name or 'openai:<model>'."
        )
    return name


def _openai(name: str, *, thinking_mode: str) -> BaseChatModel:
    """Build (or reuse) a ChatOpenAI client for `name`."""
    api_key = os.environ.get("OPENAI_API_KEY") or None
    base_url = os.environ.get("OPENAI_BASE_URL") or None
    if api_key is None and base_url is None:
        raise ModelNotConfiguredError(
            f"model 'openai:{name}' needs OPENAI_API_KEY (or OPENAI_BASE_URL for a "
            "local OpenAI-compatible server), and neither is set."
        )
    reasoning_effort = None
    if thinking_mode == "deep" and name.lower().startswith(_REASONING_PREFIXES):
        reasoning_effort = "high"
    # The environment is part of the key: a test or a notebook that points
    # OPENAI_BASE_URL elsewhere must get a new client, not the cached one.
    return _build_openai(name, reasoning_effort, api_key, base_url)


@functools.lru_cache(maxsize=64)
def _build_openai(
    name: str, reasoning_effort: str | None, api_key: str | None, base_url: str | None
) -> BaseChatModel:
    # Imported here so scripted-only use does not pay for the OpenAI SDK import.
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=name,
        # Local OpenAI-compatible servers ignore the key, but the SDK wants one.
        api_key=api_key or "not-needed",
        base_url=base_url,
        max_retries=_MAX_RETRIES,
        reasoning_effort=reasoning_effort,
        stream_usage=True,  # NOTE: streamed calls report token usage too (stream_options.include_usage)
    )


def _scripted(path: str) -> ScriptedChatModel:
    """Build (or reuse) the scripted model for a YAML file."""
    resolved = Path(path).expanduser().resolve()
    # The modification time is part of the key, so an edited script is reread.
    mtime = resolved.stat().st_mtime_ns if resolved.exists() else -1
    return _build_scripted(str(resolved), mtime)


@functools.lru_cache(maxsize=64)
def _build_scripted(path: str, mtime_ns: int) -> ScriptedChatModel:
    return ScriptedChatModel(path)
