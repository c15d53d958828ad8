"""Tool error codes (teamgraph/tools/errors.py): every error result carries one, and the docs list them all.

The executor (``run_tool_calls``) is driven directly with a fake context; the codes the
tools themselves raise are asserted where each tool is tested (tests/test_tools_unit.py
and the scenario tests, through ``scripting.error_codes``).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import ToolException, tool
from tools_fixtures import context_for

from teamgraph.messaging.results import ERROR_KEY, error_of
from teamgraph.nodes.tool_calls import run_tool_calls
from teamgraph.policy import Policy
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, fail
from teamgraph.tools.leader import create_sub_agent
from teamgraph.tools.member import ask_master


@pytest.fixture
def runtime(tmp_path) -> TeamRuntime:
    return TeamRuntime(home=tmp_path, policy=Policy())


@tool
def count_to(n: int, context: ToolContext) -> str:
    """Count to n.

    Args:
        n: How far.
    """
    if n < 0:
        raise fail(f"n must be >= 0 (got {n}).", code=errors.BAD_ARGUMENT)
    if n == 13:
        raise ToolException("unlucky")  # NOTE: a user's tool raising langchain's own exception, without a code
    if n == 99:
        raise ZeroDivisionError("a bug")
    return " ".join(str(i) for i in range(1, n + 1))


def calls(*pairs: tuple[str, dict]) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": f"c{i}"} for i, (name, args) in enumerate(pairs)]
    )


def test_every_error_result_carries_a_code_and_keeps_its_english(runtime):
    ai = calls(
        ("count_to", {"n": -1}),
        ("count_to", {"n": "many"}),
        ("count_to", {"n": 13}),
        ("count_to", {"n": 99}),
        ("fly", {}),
        ("count_to", {"n": 2}),
    )
    messages, _, _ = run_tool_calls(ai, {"count_to": count_to}, context_for(runtime).view, {}, runtime=runtime)

    assert [error_of(m) for m in messages] == [
        errors.BAD_ARGUMENT,
        errors.INVALID_CALL,
        errors.TOOL_FAILED,
        errors.TOOL_FAILED,
        errors.UNKNOWN_TOOL,
        None,
    ]
    assert [m.status for m in messages] == ["error"] * 5 + ["success"]
    assert messages[0].content == "Error: n must be >= 0 (got -1)."
    assert messages[0].additional_kwargs == {ERROR_KEY: errors.BAD_ARGUMENT}
    assert ERROR_KEY not in messages[5].additional_kwargs


def test_arguments_that_are_not_an_object_are_an_invalid_call(runtime):
    ai = AIMessage(content="", invalid_tool_calls=[{"name": "count_to", "args": "[1]", "id": "x", "error": None}])
    [message], _, _ = run_tool_calls(ai, {"count_to": count_to}, context_for(runtime).view, {}, runtime=runtime)

    assert (message.status, error_of(message)) == ("error", errors.INVALID_CALL)


def test_a_refused_tool_carries_its_refusals_code(runtime):
    ai = calls(("ask_master", {"question": "?"}), ("create_sub_agent", {"role_id": "researcher"}))
    refused = {
        "ask_master": "you may not ask now.",
        "create_sub_agent": errors.Refusal(text="first a plan.", code=errors.PLAN_REQUIRED),
    }
    tools = {"ask_master": ask_master, "create_sub_agent": create_sub_agent}
    messages, step_effects, _ = run_tool_calls(
        ai, tools, context_for(runtime, "Researcher_1").view, {}, runtime=runtime, refused=refused
    )

    assert [(error_of(m), m.content) for m in messages] == [
        (errors.FORBIDDEN, "Error: you may not ask now."),
        (errors.PLAN_REQUIRED, "Error: first a plan."),
    ]
    assert step_effects == []  # NOTE: a refused call changes nothing


def test_the_vocabulary_is_closed_and_every_constant_is_in_it():
    constants = {v for n, v in vars(errors).items() if n.isupper() and isinstance(v, str)}

    assert constants == errors.ERROR_CODES
    assert len(errors.ERROR_CODES) == 20
    with pytest.raises(ToolException):
        raise fail("x", code=errors.FORBIDDEN)
    copied = pickle.loads(pickle.dumps(fail("Not you.", code=errors.SELF_ADDRESS)))
    assert (str(copied), copied.code) == ("Not you.", errors.SELF_ADDRESS)
    assert errors.code_of(ToolException("plain")) == errors.TOOL_FAILED


def test_every_error_code_is_documented():
    documented = (Path(__file__).resolve().parent.parent / "docs" / "protocols.md").read_text()

    assert f"`{ERROR_KEY}`" in documented or f'"{ERROR_KEY}"' in documented
    assert sorted(c for c in errors.ERROR_CODES if f"`{c}`" not in documented) == []


def test_a_copied_or_pickled_tool_error_keeps_its_code_and_notes() -> None:
    import copy
    import pickle

    exc = fail("Not you.", code=errors.SELF_ADDRESS)
    exc.add_note("while sending")
    for clone in (copy.copy(exc), pickle.loads(pickle.dumps(exc))):
        assert (clone.code, clone.args, clone.__notes__) == (errors.SELF_ADDRESS, exc.args, ["while sending"])
