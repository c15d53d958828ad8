"""A member's tools (docs/protocols.md, "Member tools"): ask the master, ask and answer peers."""

from __future__ import annotations

from typing import Annotated

from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.protocols.requests import ASK, QUESTION
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import (
    View,
    answer_question,
    ask_agent,
    caller,
    defer,
    fail,
)


def make_member_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """Build the member tool set.

    Args:
        runtime: The team runtime (unused today; kept for symmetry with the other sets).

    Returns:
        ``ask_master``, ``ask_other_agent`` and ``answer_other_agent``.
    """
    del runtime

    @tool
    def ask_master(
        question: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Ask the Team Leader for a decision or missing information, and wait for the answer.

        Args:
            question: A specific question; say what you need to decide and the options.
        """
        if caller(view) == LEADER:
            raise fail("You are the Team Leader: there is no master to ask.")
        return defer(
            effects.open_request(
                request_kind=ASK, body=question, call_id=tool_call_id, tool="ask_master"
            )
        )

    @tool
    def ask_other_agent(
        display_name: str,
        question: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Ask another member a question and wait for its answer (the leader is told).

        Args:
            display_name: The other member's display name, e.g. "Researcher_1".
            question: A specific question.
        """
        if display_name == LEADER:
            raise fail("To ask the Team Leader, use ask_master.")
        return ask_agent(view, display_name, question, tool_call_id, tool="ask_other_agent")

    @tool
    def answer_other_agent(
        question_id: str,
        answer: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Answer a question another agent asked you; the answer becomes its tool result.

        Args:
            question_id: The id in the question's envelope, e.g. "ask_4".
            answer: Your answer.
        """
        return answer_question(view, question_id, answer, tool_call_id, kind=QUESTION)

    return [ask_master, ask_other_agent, answer_other_agent]
