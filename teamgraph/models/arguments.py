"""Tool-call arguments a provider sent that are JSON but not an object."""

from __future__ import annotations

import json
from typing import Any

NOT_AN_OBJECT = "the arguments are JSON but not an object (got {kind}); send a JSON object of named arguments"


def non_object_kind(arguments: Any) -> str | None:
    """The JSON type of ``arguments`` if it is valid JSON but not an object, else None."""
    if not isinstance(arguments, str):
        return None
    try:
        value = json.loads(arguments)
    except (json.JSONDecodeError, RecursionError):
        return None  # NOTE: langchain already reports invalid JSON as an invalid tool call
    if value is None or isinstance(value, dict):
        return None  # "null" and "{}" are accepted by langchain as empty arguments
    return {str: "a string", list: "an array", bool: "a boolean"}.get(type(value), "a number")
