"""Building a bench team and measuring it: the Team on a given saver, and where its time and bytes go.

``Probe`` wraps the saver's writes and teamgraph's parts to break a run's wall time down
per model call (``breakdown_ms_per_call``); ``storage_breakdown`` says where a file's
bytes go. The targets' notes use both.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.team_model import NO_BUDGET_CALLS, NO_COMPACTION_TOKENS, TeamModel


def build_team(
    workdir: Path,
    model: TeamModel,
    saver,
    *,
    max_parallel: int = 8,
    slice_steps: int | None = None,
    snapshot_frequency: int | None = None,
):
    """A Team on `saver` whose members all get the bench's `echo` tool; (team, graph)."""
    import teamgraph.state
    from bench.baselines import echo
    from teamgraph import Policy, Team

    if snapshot_frequency is not None:
        # NOTE: TeamState's annotations are strings (`from __future__ import
        # annotations`), evaluated when the StateGraph is built: the module constant
        # is read then, so setting it before `compile()` sets the DeltaChannels' cadence.
        teamgraph.state.HISTORY_SNAPSHOT_FREQUENCY = snapshot_frequency
    # NOTE: compaction (issue 15) would add summary calls to long runs and change the workload
    # the baselines are compared on (bench/context_workloads.py measures it on its own); the
    # team's call budget (issue 9, 2 000 per user message) would stop the 5 000-message run.
    policy = Policy(
        max_parallel=max_parallel,
        context_tokens=NO_COMPACTION_TOKENS,
        max_model_calls=NO_BUDGET_CALLS,
        **({"slice_steps": slice_steps} if slice_steps else {}),
    )
    team = Team(model=model, home=workdir / "home", checkpointer=saver, policy=policy, tools={"*": [echo]})
    graph = team.compile()
    return team, graph


def message_count(values: dict) -> int:
    """Messages in every agent's history (the user's task is in the leader's)."""
    return sum(len(h) for h in values.get("histories", {}).values())


def snapshot_frequency_of(graph) -> int | None:
    channel = graph.channels.get("histories")
    return getattr(channel, "snapshot_frequency", None)


def check_calls(model: TeamModel, expected: dict[str, int], what: str) -> None:
    """Fail loudly if the team did not run the scripted workload in full (e.g. a
    teamgraph change made an agent stop early): a short run would look fast."""
    got = model.calls_by_agent
    wrong = {a: (got.get(a, 0), n) for a, n in expected.items() if got.get(a, 0) != n}
    if wrong:
        detail = ", ".join(f"{a}: {g} calls, expected {n}" for a, (g, n) in wrong.items())
        raise RuntimeError(f"{what} did not run as scripted: {detail}")


def count_rows(conn: sqlite3.Connection, table: str) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


class Probe:
    """Sums the wall time spent in the parts of a teamgraph run (for the notes).

    Wraps the saver's `put` / `put_writes` (run on LangGraph's background thread;
    with durability "sync" the loop waits for them), and, in teamgraph, the router
    pass, the collaboration log's write, an agent's whole step (where the scheduler
    calls it), the system prompt and the tool calls. The model's
    own time and langchain's wrapper around it come from `TeamModel`. Parts that
    a teamgraph version lacks are skipped.
    """

    TARGETS = (
        ("router", "teamgraph.graph.router", None, "run_pass"),
        # NOTE: patched where the log's writer thread looks it up.
        ("collaboration_log", "teamgraph.audit.writer", None, "write_committed"),
        ("agent_step", "teamgraph.nodes.role_graph", None, "take_step"),
        ("system_prompt", "teamgraph.nodes.agent_step", None, "system_prompt"),
        ("tool_calls", "teamgraph.nodes.role_graph", None, "run_tool_calls"),
    )

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._undo: list[Callable[[], None]] = []

    def _wrap(self, name: str, fn: Callable) -> Callable:
        seconds, calls = self.seconds, self.calls

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - start
                calls[name] += 1

        return timed

    def _patch(self, owner: Any, attr: str, name: str) -> None:
        """Replace `owner.attr` (a class's method, a module's function or an
        instance's bound method) by a timed wrapper, remembering how to undo it."""
        if isinstance(owner, type):
            original = owner.__dict__.get(attr)
        else:
            original = getattr(owner, attr, None)
        if original is None or not callable(original):
            return
        setattr(owner, attr, self._wrap(name, original))
        self._undo.append(lambda: setattr(owner, attr, original))

    def install(self, saver: Any) -> Probe:
        """Wrap the saver's writes and teamgraph's parts (call before building the team)."""
        import importlib

        for method in ("put", "put_writes"):
            self._patch(saver, method, f"checkpoint_{method}")
        for name, module_name, cls, attr in self.TARGETS:
            try:
                owner = importlib.import_module(module_name)
            except ImportError:
                continue
            if cls is not None:
                owner = getattr(owner, cls, None)
            if owner is not None:
                self._patch(owner, attr, name)
        return self

    def uninstall(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def breakdown(self, timing: dict, model: TeamModel) -> dict[str, float]:
        """Milliseconds per model call: where the run's wall time went.

        `agent_step_machinery` is an agent's step minus the model call (with
        langchain's wrapper), the tool calls and the system prompt: the model view,
        the traced run around the call, building the step's result.
        `collaboration_log` runs on the log's writer thread, overlapping the step.
        `pregel_loop_other` is what is left of the wall time (the outer loop's
        bookkeeping, plus any checkpoint work not overlapped). Steps run on the pool's
        threads and the log on its own: parts are summed over threads and may exceed
        the wall time.
        """
        calls = timing["model_calls"] or 1
        s = self.seconds
        model_inside = timing["model_seconds"]
        wrapper = max(0.0, model.invoke_seconds - model_inside)
        step_rest = s["agent_step"] - model.invoke_seconds - s["tool_calls"] - s["system_prompt"]
        writes = s["checkpoint_put"] + s["checkpoint_put_writes"]
        other = timing["seconds"] - writes - s["router"] - s["agent_step"]
        parts = {
            "checkpoint_put": s["checkpoint_put"],
            "checkpoint_put_writes": s["checkpoint_put_writes"],
            "router": s["router"],
            "collaboration_log": s["collaboration_log"],
            "agent_step_machinery": max(0.0, step_rest),
            "system_prompt": s["system_prompt"],
            "tool_calls": s["tool_calls"],
            "chat_model_wrapper": wrapper,
            "pregel_loop_other": max(0.0, other),
        }
        return {k: round(v / calls * 1000.0, 3) for k, v in parts.items()}


@contextmanager
def probed(saver: Any) -> Iterator[Probe]:
    """A `Probe` installed for the duration of the block."""
    probe = Probe().install(saver)
    try:
        yield probe
    finally:
        probe.uninstall()


def storage_breakdown(conn: sqlite3.Connection, sample: int = 300) -> dict[str, Any]:
    """Where the file's bytes go: checkpoint blobs by channel, writes by channel,
    DeltaChannel snapshots, and what SQLite itself adds (pages, indexes).

    Checkpoint blobs are decoded for every snapshot (a blob > 3x the median) and a
    uniform sample of the others (extrapolated), re-serializing each channel value.
    """
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    from teamgraph.checkpoints import TeamSerializer

    # NOTE: the Team's serializer reads what the Team's saver wrote (and LangGraph's msgpack).
    serde = TeamSerializer()
    rows = conn.execute("SELECT rowid, length(checkpoint), length(metadata) FROM checkpoints").fetchall()
    if not rows:
        return {}
    lengths = sorted(r[1] for r in rows)
    median = lengths[len(lengths) // 2]
    big = [r[0] for r in rows if r[1] > 3 * median]
    small = [r[0] for r in rows if r[1] <= 3 * median]
    step = max(1, len(small) // sample)
    picked = small[::step]
    scale = len(small) / max(1, len(picked))
    by_channel: Counter[str] = Counter()
    snapshot_bytes = 0.0
    for rowid in big + picked:
        weight = 1.0 if rowid in big else scale
        type_, blob = conn.execute("SELECT type, checkpoint FROM checkpoints WHERE rowid = ?", (rowid,)).fetchone()
        checkpoint = serde.loads_typed((type_, blob))
        used = 0
        for channel, value in (checkpoint.get("channel_values") or {}).items():
            n = len(serde.dumps_typed(value)[1])
            used += n
            if isinstance(value, _DeltaSnapshot):
                snapshot_bytes += n * weight
                by_channel[f"{channel} (snapshots)"] += n * weight
            else:
                by_channel[channel] += n * weight
        by_channel["(versions, ids, other checkpoint fields)"] += max(0, len(blob) - used) * weight
        del checkpoint, blob
    writes = {
        ch: {"count": n, "bytes": b}
        for ch, n, b in conn.execute(
            "SELECT channel, COUNT(*), SUM(length(value)) FROM writes GROUP BY channel ORDER BY 3 DESC"
        )
    }
    checkpoint_blobs = sum(r[1] for r in rows)
    metadata = sum(r[2] for r in rows)
    return {
        "checkpoints": len(rows),
        "snapshots": len(big),
        "checkpoint_blob_bytes": checkpoint_blobs,
        "checkpoint_blob_by_channel": {k: int(v) for k, v in by_channel.most_common()},
        "snapshot_bytes": int(snapshot_bytes),
        "metadata_bytes": metadata,
        "writes_by_channel": writes,
        "writes_bytes": sum(w["bytes"] or 0 for w in writes.values()),
    }
