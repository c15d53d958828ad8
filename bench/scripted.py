"""Scripted chat models: deterministic, offline stand-ins for an LLM.

A `ScriptedChatModel` asks a *policy* what to say next. The policy sees the
conversation the agent was given and the model's own call counter, and returns an
`AIMessage` (plain text, or tool calls). The model measures the time spent inside
its own `_generate` / `_agenerate` in a shared `ModelMeter`, so the harness can
subtract it from wall time and report the framework's overhead per model call.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

Policy = Callable[[Sequence[BaseMessage], int], AIMessage]
"""`policy(messages, call_index) -> AIMessage`: what the model answers on its n-th call."""

MESSAGE_CHARS = 500
# NOTE: English-like text that does not repeat (common words, Zipf-weighted, seeded by the
# tag): a repeated Lorem ipsum compresses far better than a model's answers do, and would
# flatter any saver that compresses. zlib level 1 keeps 0.55 of a 500-character message
# and 0.42 of 20 000 characters, as it keeps 0.57 and 0.37 of Python's own docstrings.
_WORDS = (
    "the of and to a in is it you that he was for on are with as his they be at one have "
    "this from or had by not word but what some we can out other were all there when up use "
    "your how said an each she which do their time if will way about many then them write "
    "would like so these her long make thing see him two has look more day could go come did "
    "number sound no most people my over know water than call first who may down side been "
    "now find any new work part take get place made live where after back little only round "
    "man year came show every good me give our under name very through just form sentence "
    "great think say help low line differ turn cause much mean before move right boy old too "
    "same tell does set three want air well also play small end put home read hand port large "
    "spell add even land here must big high such follow act why ask men change went light "
    "kind off need house picture try us again animal point mother world near build self earth "
    "father head stand own page should country found answer school grow study still learn "
    "plant cover food sun four between state keep eye never last let thought city tree cross "
    "farm hard start might story saw far sea draw left late run while press close night real "
    "life few north"
).split()
_CUM_WEIGHTS = list(itertools.accumulate(1 / (rank + 1) ** 0.9 for rank in range(len(_WORDS))))


# NOTE: cached because the scripted model writes its text on the calls' threads, under the
# interpreter lock the framework's threads need too: a stand-in for a model's answer must
# take next to nothing from the framework it measures.
@functools.lru_cache(maxsize=4096)
def filler(tag: str, size: int = MESSAGE_CHARS) -> str:
    """Deterministic text of exactly `size` characters, starting with `[tag] `."""
    rng = random.Random(tag)  # NOTE: a str seed is hashed with SHA-512: the same in every process
    parts, length = [f"[{tag}] "], len(tag) + 3
    while length < size:
        sentence = " ".join(rng.choices(_WORDS, cum_weights=_CUM_WEIGHTS, k=16)) + ". "
        parts.append(sentence)
        length += len(sentence)
    return "".join(parts)[:size]


class ModelMeter:
    """Counts model calls and the seconds spent inside them (thread-safe, shareable)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def record(self, seconds: float) -> None:
        """Add one model call that took `seconds`."""
        with self._lock:
            self.calls += 1
            self.seconds += seconds

    def reset(self) -> None:
        """Forget everything recorded so far (e.g. after a warm-up)."""
        with self._lock:
            self.calls = 0
            self.seconds = 0.0


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answers come from a deterministic `policy` function.

    - `bind_tools` works like a real provider's: it binds OpenAI-format tool schemas
      (libraries such as langgraph-supervisor check the bound tool names).
    - `latency_ms=(lo, hi)` adds a seeded uniform random delay per call (sleep in
      `_generate`, `asyncio.sleep` in `_agenerate`); `None` means an instant model.
    - All time inside the call, delay included, is recorded in `meter`.
    """

    policy: Policy
    meter: ModelMeter
    agent: str = "agent"
    latency_ms: tuple[float, float] | None = None
    seed: int = 0

    _calls: int = PrivateAttr(default=0)
    _rng: random.Random | None = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        parallel_tool_calls: bool | None = None,
        **kwargs: Any,
    ):
        """Bind tools as OpenAI-format schemas (the policy decides which to call)."""
        schemas = [convert_to_openai_tool(t) for t in tools]
        if parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = parallel_tool_calls
        return self.bind(tools=schemas, **kwargs)

    def _next(self, messages: Sequence[BaseMessage]) -> tuple[ChatResult, float]:
        """Ask the policy for the next message; return it with the delay to apply."""
        with self._lock:
            index = self._calls
            self._calls += 1
            delay = self._delay_seconds()
        message = self.policy(messages, index)
        if message.name is None:
            message.name = self.agent
        return ChatResult(generations=[ChatGeneration(message=message)]), delay

    def _delay_seconds(self) -> float:
        """Seeded random latency for one call, or 0 for an instant model."""
        if self.latency_ms is None:
            return 0.0
        if self._rng is None:
            self._rng = random.Random(f"{self.seed}:{self.agent}")
        lo, hi = self.latency_ms
        return self._rng.uniform(lo, hi) / 1000.0

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        start = time.perf_counter()
        result, delay = self._next(messages)
        if delay:
            time.sleep(delay)
        self.meter.record(time.perf_counter() - start)
        return result

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        start = time.perf_counter()
        result, delay = self._next(messages)
        if delay:
            await asyncio.sleep(delay)
        self.meter.record(time.perf_counter() - start)
        return result


def say(text: str) -> AIMessage:
    """A plain answer with no tool calls."""
    return AIMessage(content=text)


def call_tool(tool: str, args: dict, *, call_id: str, content: str = "") -> AIMessage:
    """An assistant message that calls one tool."""
    return AIMessage(content=content, tool_calls=[{"name": tool, "args": args, "id": call_id}])
