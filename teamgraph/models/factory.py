"""Turn a model spec into a chat model.

A spec is a `BaseChatModel` (used as is), a string `"<provider>:<model>"`, or
`None` to read the `TEAMGRAPH_MODEL` environment variable. Providers:

- `openai:<model>`: `ChatOpenAI` from `OPENAI_API_KEY` / `OPENAI_BASE_URL` (any
  OpenAI-compatible server), built here so a local server needs no key;
- `scripted:<path.yaml>`: the scripted model replaying a YAML script;
- any provider langchain's `init_chat_model` knows (`anthropic:`, `ollama:`,
  `google_genai:`, `mistralai:`, ...), from its package (`langchain-anthropic`,
  `langchain-ollama`, ...), which must be installed.

Nothing here touches the network: clients connect on first use.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from teamgraph.models.scripted import ScriptedChatModel

__all__ = [
    "known_providers",
    "ENV_VAR",
    "ModelNotConfiguredError",
    "ModelPackageMissingError",
    "THINKING_SETTINGS",
    "UnconfiguredChatModel",
    "resolve_model",
    "thinking_kwargs",
]

ENV_VAR = "TEAMGRAPH_MODEL"

_ACCEPTED = (
    "a chat model object, 'openai:<model>' (e.g. 'openai:gpt-4o-mini'), "
    "'scripted:<path.yaml>', or '<provider>:<model>' for any provider of "
    "langchain's init_chat_model (e.g. 'anthropic:claude-sonnet-4-5', 'ollama:llama3.1')"
)
# A few client retries for transient HTTP errors; the graph's RetryPolicy
# handles anything longer, so keep this small to avoid stacked retries.
_MAX_RETRIES = 2
# Role files that leave the model to the team (`model: inherit`, empty).
_NO_ROLE_MODEL = ("", "inherit")
# Providers with a teamgraph extra that installs their package.
_EXTRAS = {"anthropic": "anthropic", "ollama": "ollama"}
# OpenAI models that take `reasoning_effort` instead of a thinking prompt.
_OPENAI_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# Claude models older than extended thinking (they refuse the `thinking` setting).
_ANTHROPIC_NO_THINKING_PREFIXES = ("claude-2", "claude-instant", "claude-3-")
_ANTHROPIC_THINKING_BUDGET = 8_192
_ANTHROPIC_THINKING_MAX_TOKENS = 16_384

THINKING_SETTINGS: dict[str, str] = {
    "openai": "reasoning_effort='high' on reasoning models (o1, o3, o4, gpt-5*)",
    "anthropic": f"thinking={{'type': 'enabled', 'budget_tokens': {_ANTHROPIC_THINKING_BUDGET}}} "
    "on Claude 3.7 and later",
    "ollama": "reasoning=True (models that think, e.g. qwen3, deepseek-r1)",
}
"""What `thinking_mode: deep` sets, per provider. Every other provider (and every
model not listed) thinks through its prompt only: the role prompt asks a deep
role to reason step by step (roles/prompts.py)."""


class ModelNotConfiguredError(RuntimeError):
    """No model was given and the environment does not name one."""

    def __init__(self, reason: str = f"{ENV_VAR} is not set.", *, one_line: bool = False) -> None:
        if one_line:
            super().__init__(f"No model configured: {reason}")
            return
        super().__init__(
            f"No model configured: {reason}\n"
            "Choose one of:\n"
            f"  - {ENV_VAR}=openai:<model> with OPENAI_API_KEY set (and "
            "OPENAI_BASE_URL for any OpenAI-compatible server, e.g. a local one);\n"
            f"  - {ENV_VAR}=anthropic:<model>, ollama:<model>, ... (any provider of "
            "langchain's init_chat_model, its package installed);\n"
            f"  - {ENV_VAR}=scripted:<path.yaml> to replay a scripted team;\n"
            '  - pass model= to Team, e.g. Team(model="openai:gpt-4o-mini");\n'
            "  - or try `teamgraph demo`."
        )


class UnconfiguredChatModel(BaseChatModel):
    """A stand-in that fails on its first call with why no model could be built.

    Where a graph must be importable before it is configured (``langgraph dev``
    loads ``teamgraph/studio.py`` before any run says which model to use), the
    team is compiled with this model; the first run then fails with ``reason``.
    """

    reason: str

    @property
    def _llm_type(self) -> str:
        return "unconfigured"

    def bind_tools(self, tools: Any, **kwargs: Any) -> UnconfiguredChatModel:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        raise ModelNotConfiguredError(self.reason, one_line=True)


class ModelPackageMissingError(ImportError):
    """The spec names a provider whose langchain package is not installed."""

    def __init__(self, spec: str, provider: str, package: str) -> None:
        extra = _EXTRAS.get(provider)
        how = f"pip install {package}" + (f" (or pip install 'teamgraph[{extra}]')" if extra else "")
        super().__init__(f"Model {spec!r} needs the package {package}, which is not installed: {how}.")
        self.package = package


def resolve_model(
    spec: BaseChatModel | str | None = None,
    *,
    role_model: str | None = None,
    thinking_mode: str = "fast",
) -> BaseChatModel:
    """Return the chat model a spec names.

    Args:
        spec: A chat model, `"<provider>:<model>"` (`openai:`, `scripted:`,
            `anthropic:`, `ollama:`, ...), or `None` for `$TEAMGRAPH_MODEL`.
        role_model: A role file's `model:` field; it wins over the team's model.
            `"<provider>:<model>"` names a model of its own; a bare name keeps
            the team's provider (and, for an object, its settings: the object
            is copied with the new model name). A scripted team ignores it:
            the script plays every agent.
        thinking_mode: `"deep"` turns on the provider's reasoning setting where
            it has one (see `THINKING_SETTINGS`); elsewhere the prompt asks.

    Returns:
        The chat model. Built models are cached per process, so every member
        of a role shares one client.

    Raises:
        ModelNotConfiguredError: No spec and no `TEAMGRAPH_MODEL`, or an OpenAI
            spec with neither `OPENAI_API_KEY` nor `OPENAI_BASE_URL`.
        ModelPackageMissingError: The provider's package is not installed.
        ValueError: The spec or the role model is not an accepted form.
        TypeError: The spec is neither a chat model, a string nor `None`.
    """
    if spec is None:
        spec = os.environ.get(ENV_VAR, "").strip()
        if not spec:
            raise ModelNotConfiguredError()
    if isinstance(spec, ScriptedChatModel):
        return spec
    own = _role_model(role_model)
    if isinstance(spec, BaseChatModel):
        if own is None:
            return spec
        provider, name = own
        return _renamed(spec, name) if provider is None else _build(provider, name, thinking_mode)
    if not isinstance(spec, str):
        raise TypeError(f"A model spec must be {_ACCEPTED}; got {type(spec).__name__}.")

    provider, target = _split(spec)
    if provider == "scripted":
        return _scripted(target)
    if own is not None:
        provider, target = own[0] or provider, own[1]
    return _build(provider, target, thinking_mode)


_FALLBACK_PROVIDERS = ("anthropic", "azure_openai", "bedrock", "google_genai", "groq", "mistralai", "ollama", "openai")


def known_providers() -> tuple[str, ...]:
    """The providers ``init_chat_model`` knows (each needs its own langchain package installed).

    NOTE: langchain keeps the list in a private name (``_BUILTIN_PROVIDERS``, langchain 1.x);
    a release that moves it gives the common providers instead of failing the CLI's help.
    """
    try:
        from langchain.chat_models.base import _BUILTIN_PROVIDERS
    except ImportError:
        return _FALLBACK_PROVIDERS
    return tuple(sorted(_BUILTIN_PROVIDERS)) or _FALLBACK_PROVIDERS


def _split(spec: str) -> tuple[str, str]:
    """`"openai:gpt-4o"` -> `("openai", "gpt-4o")`."""
    provider, sep, target = spec.strip().partition(":")
    if not sep or not provider.strip() or not target.strip():
        raise ValueError(f"Unknown model spec {spec!r}: use {_ACCEPTED}.")
    return provider.strip().lower(), target.strip()


def _role_model(role_model: str | None) -> tuple[str | None, str] | None:
    """A role's own model as `(provider or None for the team's, name)`, or `None` to inherit."""
    if role_model is None or role_model.strip().lower() in _NO_ROLE_MODEL:
        return None
    if ":" not in role_model:
        return None, role_model.strip()
    provider, name = _split(role_model)
    if provider == "scripted":
        raise ValueError(f"Role model {role_model!r}: a role cannot name a script; use '<provider>:<model>'.")
    return provider, name


def _renamed(model: BaseChatModel, name: str) -> BaseChatModel:
    """A copy of ``model`` (same client settings) talking to the model ``name``."""
    # NOTE: langchain's chat models call the field `model_name` (OpenAI, alias
    # `model`) or `model` (Anthropic, Ollama, most others).
    for field in ("model_name", "model"):
        if field in type(model).model_fields:
            return model.model_copy(update={field: name})
    raise ValueError(
        f"A role asks for model {name!r}, but the team's {type(model).__name__} has no model "
        "name to change: give the role '<provider>:<model>' instead."
    )


def _build(provider: str, name: str, thinking_mode: str) -> BaseChatModel:
    if provider == "openai":
        return _openai(name, thinking_mode=thinking_mode)
    return _any_provider(provider, name, thinking_mode=thinking_mode)


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
    if thinking_mode == "deep" and name.lower().startswith(_OPENAI_REASONING_PREFIXES):
        reasoning_effort = "high"
    # The environment is part of the key: a test or a notebook that points
    # OPENAI_BASE_URL elsewhere must get a new client, not the cached one.
    return _build_openai(name, reasoning_effort, api_key, base_url)


@functools.lru_cache(maxsize=64)
def _build_openai(name: str, reasoning_effort: str | None, api_key: str | None, base_url: str | None) -> BaseChatModel:
    # Imported here so scripted-only use does not pay for the OpenAI SDK import.
    from teamgraph.models.openai import TeamChatOpenAI

    return TeamChatOpenAI(
        model=name,
        # Local OpenAI-compatible servers ignore the key, but the SDK wants one.
        api_key=SecretStr(api_key or "not-needed"),
        base_url=base_url,
        max_retries=_MAX_RETRIES,
        reasoning_effort=reasoning_effort,
        # NOTE: streamed responses carry token usage only when asked for.
        stream_usage=True,
    )


def thinking_kwargs(provider: str, name: str, thinking_mode: str) -> dict[str, Any]:
    """The constructor arguments `thinking_mode` maps to for a provider's model (see `THINKING_SETTINGS`)."""
    if thinking_mode != "deep":
        return {}
    lowered = name.lower()
    if provider == "anthropic" and not lowered.startswith(_ANTHROPIC_NO_THINKING_PREFIXES):
        return {
            "thinking": {"type": "enabled", "budget_tokens": _ANTHROPIC_THINKING_BUDGET},
            "max_tokens": _ANTHROPIC_THINKING_MAX_TOKENS,
        }
    if provider == "ollama":
        return {"reasoning": True}
    return {}


def _any_provider(provider: str, name: str, *, thinking_mode: str) -> BaseChatModel:
    """Build (or reuse) a model of any provider through langchain's `init_chat_model`."""
    prefix = provider.split("_")[0].upper()
    # The provider's variables (ANTHROPIC_API_KEY, OLLAMA_HOST, ...) are part of the key.
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(prefix)))
    return _build_any(provider, name, thinking_mode, env)


@functools.lru_cache(maxsize=64)
def _build_any(provider: str, name: str, thinking_mode: str, env: tuple[tuple[str, str], ...]) -> BaseChatModel:
    from langchain.chat_models import init_chat_model

    spec = f"{provider}:{name}"
    try:
        model = init_chat_model(
            name, model_provider=provider, max_retries=_MAX_RETRIES, **thinking_kwargs(provider, name, thinking_mode)
        )
    except ImportError as e:
        found = re.search(r"langchain-[a-z0-9-]+", str(e))
        package = found.group(0) if found else f"langchain-{provider.replace('_', '-')}"
        raise ModelPackageMissingError(spec, provider, package) from e
    except ValueError as e:
        if "provider" not in str(e).lower():
            raise
        raise ValueError(f"Unknown model spec {spec!r}: use {_ACCEPTED}. ({e})") from e
    if not isinstance(model, BaseChatModel):  # pragma: no cover - init_chat_model builds chat models
        raise TypeError(f"{spec!r} built a {type(model).__name__}, not a chat model.")
    return model


def _scripted(path: str) -> ScriptedChatModel:
    """Build (or reuse) the scripted model for a YAML file."""
    resolved = Path(path).expanduser().resolve()
    # The modification time is part of the key, so an edited script is reread.
    mtime = resolved.stat().st_mtime_ns if resolved.exists() else -1
    return _build_scripted(str(resolved), mtime)


@functools.lru_cache(maxsize=64)
def _build_scripted(path: str, mtime_ns: int) -> ScriptedChatModel:
    return ScriptedChatModel(path)
