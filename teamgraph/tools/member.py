"""A member's tools (docs/protocols.md, "Member tools"): ask the master, ask and answer peers."""

from __future__ import annotations

from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from teamgraph.messaging import effects
from teamgraph.protocols.requests import ASK, QUESTION
from teamgraph.records import LEADER
from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, answer_question, ask_agent, defer, fail


@tool(parse_docstring=True)
def ask_master(question: str, context: ToolContext) -> Command:
    """Ask the Team Leader for a decision or missing information, and wait for the answer.

    Args:
        question: A specific question; say what you need to decide and the options.
    """
    if context.caller == LEADER:
        raise fail("You are the Team Leader: there is no master to ask.", code=errors.SELF_ADDRESS)
    return defer(effects.open_request(request_kind=ASK, body=question, call_id=context.tool_call_id, tool="ask_master"))


@tool(parse_docstring=True)
def ask_other_agent(display_name: str, question: str, context: ToolContext) -> Command:
    """Ask another member a question and wait for its answer (the leader is told).

    Args:
        display_name: The other member's display name, e.g. "Researcher_1".
        question: A specific question.
    """
    if display_name == LEADER:
        raise fail("To ask the Team Leader, use ask_master.", code=errors.NOT_A_MEMBER)
    return ask_agent(context, display_name, question, tool="ask_other_agent")


@tool(parse_docstring=True)
def answer_other_agent(question_id: str, answer: str, context: ToolContext) -> Command:
    """Answer a question another agent asked you; the answer becomes its tool result.

    Args:
        question_id: The id in the question's envelope, e.g. "ask_4".
        answer: Your answer.
    """
    return answer_question(context, question_id, answer, kind=QUESTION)


MEMBER_TOOLS: list[BaseTool] = [ask_master, ask_other_agent, answer_other_agent]
"""The ``member`` tool set."""
