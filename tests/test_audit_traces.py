"""Traces name agents: each agent's step run carries its display name, tags and metadata."""

from __future__ import annotations

from langchain_core.callbacks import BaseCallbackHandler
from scripting import act, call

LEADER = "Team Leader"


class RunRecorder(BaseCallbackHandler):
    """Records (run name, tags, metadata) of every chain run, and the tags of every model run."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, list[str], dict]] = []
        self.model_runs: list[list[str]] = []

    def on_chain_start(self, serialized, inputs, *, tags=None, metadata=None, **kwargs) -> None:
        self.runs.append((kwargs.get("name") or "", list(tags or []), dict(metadata or {})))

    def on_chat_model_start(self, serialized, messages, *, tags=None, **kwargs) -> None:
        self.model_runs.append(list(tags or []))


def test_each_agent_step_run_is_named_after_the_agent(make_team):
    run = make_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="ui-operator", task="A"),
                    call("create_sub_agent", role_id="ui-operator", task="B"),
                ),
                "",
                "",
                "Done.",
            ],
            "UI Operator_1": ["UI 1 done."],
            "UI Operator_2": ["UI 2 done."],
        }
    )
    recorder = RunRecorder()
    run.send("Go", callbacks=[recorder])

    named = {
        name: (tags, meta) for name, tags, meta in recorder.runs if name in (LEADER, "UI Operator_1", "UI Operator_2")
    }
    assert set(named) == {LEADER, "UI Operator_1", "UI Operator_2"}
    for name, (tags, meta) in named.items():
        role = "team-leader" if name == LEADER else "ui-operator"
        assert f"teamgraph:agent:{name}" in tags and f"teamgraph:role:{role}" in tags
        assert (meta["teamgraph_agent"], meta["teamgraph_role"]) == (name, role)
    # The model runs inside a step inherit the tags, so a trace filter by agent finds them.
    model_runs = recorder.model_runs
    assert model_runs and all(any(t.startswith("teamgraph:agent:") for t in tags) for tags in model_runs)
