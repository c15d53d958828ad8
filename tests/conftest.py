"""Shared pytest fixtures for the teamgraph test suite."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Make ``tests/openai_server.py`` importable whether or not ``tests`` is a package.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
from openai_server import Script, ScriptedOpenAIServer  # noqa: E402


@pytest.fixture
def openai_server() -> Iterator[Callable[[Script], ScriptedOpenAIServer]]:
    """Factory for local OpenAI-compatible servers answering from a script.

    ``openai_server(script)`` returns a started :class:`ScriptedOpenAIServer`;
    every server created is stopped when the test ends::

        def test_x(openai_server):
            server = openai_server(["Hello!"])
            llm = ChatOpenAI(model="gpt-test", base_url=server.base_url, api_key="test")
    """
    servers: list[ScriptedOpenAIServer] = []

    def start(script: Script, **kwargs) -> ScriptedOpenAIServer:
        server = ScriptedOpenAIServer(script, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
