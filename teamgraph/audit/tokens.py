"""Token accounting: input/output tokens per agent and for the team, and their cost.

Every ``AIMessage`` a provider returned carries ``usage_metadata`` (ChatOpenAI
reports it for streamed calls too, with ``stream_usage=True``); the totals are
sums over the histories, so they survive a resume like the histories do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage

PER_TOKENS = 1_000_000
"""Prices are per million tokens."""
ANY_MODEL = "*"
"""The price-table key that applies to models the table does not name."""


class Price(TypedDict):
    """The price of one million tokens (in any currency, the same for every model)."""

    input: float
    output: float


class TokenUsage(TypedDict):
    """Token totals of some model calls.

    Attributes:
        input: Prompt tokens.
        output: Completion tokens.
        total: Both.
        calls: Model calls counted.
        cost: What they cost with the team's price table, or None without one
            (or when a model has no price).
    """

    input: int
    output: int
    total: int
    calls: int
    cost: float | None


def empty_usage(*, priced: bool = False) -> TokenUsage:
    """Zero tokens (cost 0.0 when a price table is in use, else None)."""
    return TokenUsage(input=0, output=0, total=0, calls=0, cost=0.0 if priced else None)


def model_of(message: AIMessage) -> str:
    """The model that produced ``message`` (from its response metadata), or ``""``."""
    meta = message.response_metadata or {}
    return str(meta.get("model_name") or meta.get("model") or "")


def price_of(prices: Mapping[str, Price], model: str) -> Price | None:
    """The price of ``model``: its own entry, the longest matching prefix, or ``"*"``."""
    if model in prices:
        return prices[model]
    prefixes = [key for key in prices if key != ANY_MODEL and model.startswith(key)]
    if prefixes:
        return prices[max(prefixes, key=len)]
    return prices.get(ANY_MODEL)


def usage_of(messages: Iterable[AnyMessage], prices: Mapping[str, Price] | None = None) -> TokenUsage:
    """The token totals of the model calls among ``messages``.

    Args:
        messages: One agent's history (or any messages).
        prices: A price table ``{model: {"input": ..., "output": ...}}`` per million
            tokens; ``"*"`` prices every other model.

    Returns:
        The totals; ``cost`` is None without prices or when a used model has no price.
    """
    usage = empty_usage(priced=bool(prices))
    for message in messages:
        if not isinstance(message, AIMessage) or not message.usage_metadata:
            continue
        meta = message.usage_metadata
        usage["input"] += int(meta.get("input_tokens", 0))
        usage["output"] += int(meta.get("output_tokens", 0))
        usage["calls"] += 1
        if prices and usage["cost"] is not None:
            price = price_of(prices, model_of(message))
            usage["cost"] = (
                None
                if price is None
                else usage["cost"]
                + (meta.get("input_tokens", 0) * price["input"] + meta.get("output_tokens", 0) * price["output"])
                / PER_TOKENS
            )
    usage["total"] = usage["input"] + usage["output"]
    return usage


def add_usage(parts: Iterable[TokenUsage]) -> TokenUsage:
    """The sum of several totals (cost None if any part has none while others have one)."""
    parts = list(parts)
    total = empty_usage(priced=any(p["cost"] is not None for p in parts))
    for part in parts:
        for key in ("input", "output", "total", "calls"):
            total[key] += part[key]
        if total["cost"] is not None:
            total["cost"] = None if part["cost"] is None else total["cost"] + part["cost"]
    return total


def agent_tokens(values: Mapping[str, Any], prices: Mapping[str, Price] | None = None) -> dict[str, TokenUsage]:
    """Per agent token totals of a thread's state values."""
    histories = values.get("histories") or {}
    return {name: usage_of(histories.get(name, []), prices) for name in values.get("agents") or {}}


def team_tokens(values: Mapping[str, Any], prices: Mapping[str, Price] | None = None) -> TokenUsage:
    """The team's token totals (every agent's, added)."""
    return add_usage(agent_tokens(values, prices).values())


def check_prices(prices: Any) -> dict[str, Price]:
    """A valid price table, or a ValueError saying what is wrong.

    Raises:
        TypeError: If ``prices`` is not a mapping.
        ValueError: If an entry is not ``{"input": number, "output": number}``.
    """
    example = "{'gpt-4o-mini': {'input': 0.15, 'output': 0.60}} (per million tokens; '*' for any model)"
    if not isinstance(prices, Mapping):
        raise TypeError(f"prices= must be a mapping like {example}, got {prices!r}.")
    table: dict[str, Price] = {}
    for model, price in prices.items():
        if (
            not isinstance(price, Mapping)
            or set(price) != {"input", "output"}
            or not all(isinstance(v, int | float) and v >= 0 for v in price.values())
        ):
            raise ValueError(
                f"prices[{model!r}] must be {{'input': number >= 0, 'output': number >= 0}}; "
                f"got {price!r}. Example: {example}."
            )
        table[str(model)] = Price(input=float(price["input"]), output=float(price["output"]))
    return table


def with_tokens(values: Mapping[str, Any], prices: Mapping[str, Price] | None = None) -> dict[str, dict[str, Any]]:
    """The registry of ``values`` with each agent's ``tokens`` (a ``TokenUsage``) added."""
    tokens = agent_tokens(values, prices)
    return {name: {**record, "tokens": tokens[name]} for name, record in (values.get("agents") or {}).items()}
