"""teamgraph's own workloads (sections 1-6 of the benchmarks issue).

Every workload runs teamgraph offline with the scripted team of ``bench.team_model``,
built and measured by ``bench.team_probe``. Checkpoints go to a `SqliteSaver` on a
fresh file (`bench.harness.fresh_sqlite_saver`, the baselines' setup) and every run
passes `durability="sync"`.

- ``teamgraph`` (sections 1 and 3): the supervisor's round with teamgraph's own
  tools. The leader creates two researchers (one step), then per round:
  leader ``ask_sub_agent(Researcher_1, ...)`` -> Researcher_1 calls ``echo``, then
  answers (its answer is the leader's tool result) -> leader
  ``ask_sub_agent(Researcher_2, ...)`` -> Researcher_2 the same. After R rounds
  the leader answers. 6 model calls and 12 messages per round (+2 calls and +5
  messages for the setup and the final answer). Every model-written text is ~500
  characters, and so is every echo argument. A member's echo call carries no
  prose: teamgraph forwards every text a member writes to the leader as progress,
  which would answer the leader's ``ask_sub_agent`` with the reasoning.
  ``teamgraph`` with ``saver="teamgraph"`` runs on the Team's own SQLite setup
  (``teamgraph.checkpoints.open_sqlite_saver``: WAL, synchronous=NORMAL) instead.
- ``teamgraph-storage`` (sections 2, 3 and 5): the same run sized to 100 / 500 /
  1 000 / 5 000 messages; at 500 and 5 000, 3 fresh processes then each open a copy
  of the file, ``get_state`` and take one more step (the leader answers a new user
  message); the fastest is kept.
- ``teamgraph-cadence``: the 500 / 1 000 / 5 000-message runs at other DeltaChannel
  snapshot cadences (``teamgraph.state.HISTORY_SNAPSHOT_FREQUENCY``, set in the
  child before the graph is compiled): storage vs resume time, to choose the cadence.
- ``teamgraph-parallel`` (section 4): 8 members x 10 steps (9 echo calls, then an
  answer), each member call sleeping a seeded random 20-80 ms; makespan over the
  critical path (the slowest member's own total latency). The leader's model is
  instant. ``Policy(max_parallel=8)`` (default) vs 1; members that also write
  ~500 characters of progress with every echo call (each one wakes the leader);
  and, as a diagnostic, LangGraph's thread pool sized with ``max_concurrency=16``.
  ``lockstep_bound_s`` is the makespan of the same calls with zero framework time
  and one call per member per superstep.
- ``teamgraph-scale`` (section 6): 5, 20, 50 members for 10 rounds; a round is
  every member echoing and answering once, then the leader messaging each again.

Each row also carries `breakdown_ms_per_call` (where the wall time goes: checkpoint
writes, router, agent steps, model wrapper, tools) and, for storage rows,
`storage_breakdown` (where the bytes go), used by the targets' notes.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage

from bench.harness import db_bytes, fresh_sqlite_saver, peak_rss_mb, sqlite_saver, timed_invoke
from bench.registry import Workload
from bench.resume_workloads import measure_resume
from bench.scripted import ModelMeter
from bench.team_model import (
    CADENCES,
    FULL_ROUNDS,
    LEADER,
    RESUME_AT,
    RESUME_REPEATS,
    STORAGE_MESSAGES,
    SYSTEM,
    TASK,
    TeamModel,
    delegation_leader,
    echo_member,
    fan_out_leader,
    member_name,
    rounds_for,
    thread_id,
)
from bench.team_probe import (
    build_team,
    check_calls,
    count_rows,
    message_count,
    probed,
    snapshot_frequency_of,
    storage_breakdown,
)

# --- section 1, 2, 3, 5: delegation rounds ------------------------------------------


def run_delegation(
    params: dict, workdir: Path, *, label: str, path: Path | None = None, with_storage: bool = False
) -> dict:
    """Run R delegation rounds on a fresh SQLite file; measure time, bytes, breakdown."""
    rounds = int(params["rounds"])
    meter = ModelMeter()
    model = TeamModel(policies={LEADER: delegation_leader(rounds), "*": echo_member()}, meter=meter)
    path = path or workdir / "teamgraph.sqlite"
    saver, conn, suffix = sqlite_saver(path, params)
    label += suffix
    with probed(saver) as probe:
        team, graph = build_team(workdir, model, saver, snapshot_frequency=params.get("snapshot_frequency"))
        config = {"configurable": {"thread_id": thread_id(rounds)}}
        _output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    messages = message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    check_calls(
        model,
        {LEADER: 2 * rounds + 2, member_name(1): 2 * rounds, member_name(2): 2 * rounds},
        f"delegation R={rounds}",
    )
    size = db_bytes(path, conn)
    row = {
        "system": SYSTEM,
        "workload": label,
        "rounds": rounds,
        "messages": messages,
        "db_bytes": size,
        "snapshot_frequency": snapshot_frequency_of(graph),
        "checkpoints": count_rows(conn, "checkpoints"),
        "writes": count_rows(conn, "writes"),
        "breakdown_ms_per_call": probe.breakdown(timing, model),
        **timing,
    }
    # NOTE: peak RSS of the run itself, before the storage breakdown decodes blobs.
    row["peak_rss_mb"] = peak_rss_mb()
    if with_storage:
        row["storage_breakdown"] = storage_breakdown(conn)
    conn.close()
    return row


def delegation_workload(params: dict, workdir: Path) -> dict:
    """teamgraph's leader delegating R rounds to two researchers (ask_sub_agent + echo)."""
    return run_delegation(params, workdir, label="delegation rounds")


def storage_workload(params: dict, workdir: Path) -> dict:
    """Checkpoint storage at N messages (delegation rounds); with `resume`, fresh
    processes then open the thread, get_state and take one more step."""
    target = int(params["messages"])
    rounds = rounds_for(target)
    path = workdir / "teamgraph.sqlite"
    label = "storage + resume" if params.get("resume") else "checkpoint storage"
    # NOTE: the file a user's Team writes (the Team's saver and serializer), which the
    # resumed process then opens.
    run = {"rounds": rounds, "snapshot_frequency": params.get("snapshot_frequency"), "saver": "teamgraph"}
    row = run_delegation(run, workdir, label=label, path=path, with_storage=True)
    notes = [f"cadence {row['snapshot_frequency']}"]
    if params.get("resume"):
        resume = measure_resume(path, rounds, row["snapshot_frequency"], int(params.get("repeats", RESUME_REPEATS)))
        row["resume"] = resume
        notes.append(f"resume {resume['in_process_ms']:.0f} ms (process {resume['process_ms']:.0f} ms)")
    row["note"] = ", ".join(notes)
    return row


def cadence_workload(params: dict, workdir: Path) -> dict:
    """storage (+ resume unless `resume` is false) at another DeltaChannel snapshot cadence."""
    return storage_workload({**params, "resume": params.get("resume", True)}, workdir)


# --- section 4: parallel makespan ------------------------------------------------------


MODEL_LIKE_PARALLEL = {"members": 8, "steps": 3, "max_parallel": 8, "latency_ms": [1000, 3000], "saver": "teamgraph"}
"""The parallel workload with calls as long as a hosted model's, on the Team's saver."""


def parallel_workload(params: dict, workdir: Path) -> dict:
    """N members x S steps with seeded random 20-80 ms model latency: makespan / critical path."""
    members, steps = int(params["members"]), int(params["steps"])
    max_parallel = int(params.get("max_parallel", 8))
    slice_steps = params.get("slice_steps")
    progress = bool(params.get("progress", False))
    lo, hi = params.get("latency_ms", (20, 80))
    names = frozenset(member_name(i) for i in range(1, members + 1))
    meter = ModelMeter()
    model = TeamModel(
        policies={LEADER: fan_out_leader(members, 1), "*": echo_member(steps=steps, progress=progress)},
        meter=meter,
        latency_ms=(lo, hi),
        slow=names,
        seed=int(params.get("seed", 0)),
    )
    path = workdir / "parallel.sqlite"
    saver, conn, suffix = sqlite_saver(path, params)
    with probed(saver) as probe:
        team, graph = build_team(workdir, model, saver, max_parallel=max_parallel, slice_steps=slice_steps)
        config = {"configurable": {"thread_id": "parallel"}}
        if params.get("max_concurrency"):
            # NOTE: diagnostic only: LangGraph runs a superstep's tasks (and the
            # checkpoint writes) on a thread pool of `max_concurrency` workers,
            # min(32, CPUs + 4) when unset, which teamgraph does not set.
            config["max_concurrency"] = int(params["max_concurrency"])
        _output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    messages = message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    check_calls(model, {name: steps for name in names}, f"parallel {members}x{steps}")
    latency = model.latency_by_agent
    critical = max(latency.values())
    # The makespan of the same calls run in lockstep (step j of every member in one
    # superstep) with zero framework time: what one call per superstep costs by itself.
    delays = list(model.delays_by_agent.values())
    lockstep = sum(max(d[j] for d in delays if j < len(d)) for j in range(max(len(d) for d in delays)))
    makespan = timing["seconds"]
    supersteps = count_rows(conn, "checkpoints")
    conn.close()
    ratio = makespan / critical
    variant = f"max_parallel={max_parallel}, slice_steps={team.runtime.policy.slice_steps}"
    variant += ", progress" if progress else ""
    variant += f", {lo}-{hi} ms calls" if (lo, hi) != (20, 80) else ""
    if params.get("max_concurrency"):
        variant += f", max_concurrency={params['max_concurrency']}"
    variant += suffix
    return {
        "system": SYSTEM,
        "workload": f"parallel ({variant})",
        "members": members,
        "steps": steps,
        "max_parallel": max_parallel,
        "progress": progress,
        "slice_steps": team.runtime.policy.slice_steps,
        "messages": messages,
        "makespan_s": makespan,
        "critical_path_s": critical,
        "makespan_over_critical": ratio,
        "sum_latency_s": sum(latency.values()),
        "checkpoints": supersteps,
        "lockstep_bound_s": lockstep,
        "lockstep_over_critical": lockstep / critical,
        # NOTE: model time overlaps across threads: no per-call overhead here.
        "overhead_ms_per_call": None,
        "breakdown_ms_per_call": probe.breakdown(timing, model),
        "note": f"makespan/critical {ratio:.2f} ({makespan:.2f} s / {critical:.2f} s; "
        f"lockstep bound {lockstep / critical:.2f})",
        **timing,
    }


# --- section 6: scale --------------------------------------------------------------------


def scale_workload(params: dict, workdir: Path) -> dict:
    """N members for R rounds (each: every member echoes and answers; the leader
    messages each again): time per round and peak memory."""
    members, rounds = int(params["members"]), int(params["rounds"])
    meter = ModelMeter()
    model = TeamModel(policies={LEADER: fan_out_leader(members, rounds), "*": echo_member()}, meter=meter)
    path = workdir / "scale.sqlite"
    saver, conn = fresh_sqlite_saver(path)
    with probed(saver) as probe:
        team, graph = build_team(workdir, model, saver)
        config = {"configurable": {"thread_id": "scale"}}
        _output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    messages = message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    check_calls(
        model, {member_name(i): 2 * rounds for i in range(1, members + 1)}, f"scale {members} members x {rounds} rounds"
    )
    size = db_bytes(path, conn)
    checkpoints = count_rows(conn, "checkpoints")
    conn.close()
    per_round = timing["seconds"] / rounds
    return {
        "system": SYSTEM,
        "workload": "scale",
        "members": members,
        "rounds": rounds,
        "messages": messages,
        "db_bytes": size,
        "checkpoints": checkpoints,
        "seconds_per_round": per_round,
        "seconds_per_round_per_member": per_round / members,
        "breakdown_ms_per_call": probe.breakdown(timing, model),
        "note": f"{per_round * 1000:.0f} ms/round ({per_round / members * 1000:.1f} ms/member)",
        **timing,
    }


# --- registry ------------------------------------------------------------------------


def _default_cadence() -> int | None:
    try:
        import teamgraph.state

        return int(teamgraph.state.HISTORY_SNAPSHOT_FREQUENCY)
    except Exception:  # noqa: BLE001 - the rows then say which cadence ran
        return None


def _cadence_params() -> list[dict]:
    default = _default_cadence()
    return [
        {"snapshot_frequency": f, "messages": m, **({} if m in RESUME_AT else {"resume": False})}
        for f in CADENCES
        if f != default
        for m in (500, 1000, 5000)
    ]


WORKLOADS: dict[str, Workload] = {
    "teamgraph": Workload(
        delegation_workload,
        full=[{"rounds": r} for r in FULL_ROUNDS] + [{"rounds": r, "saver": "teamgraph"} for r in (10, 100)],
        quick=[{"rounds": 10}],
        repeats=2,
        description=delegation_workload.__doc__,
    ),
    "teamgraph-storage": Workload(
        storage_workload,
        full=[{"messages": m, **({"resume": True} if m in RESUME_AT else {})} for m in STORAGE_MESSAGES],
        # NOTE: the quick run resumes with a tiny cadence, so snapshots are exercised too.
        quick=[{"messages": 100, "resume": True, "repeats": 1, "snapshot_frequency": 10}],
        timeout_s=900.0,
        description=storage_workload.__doc__,
    ),
    "teamgraph-parallel": Workload(
        parallel_workload,
        full=[
            {"members": 8, "steps": 10, "max_parallel": 8},
            {"members": 8, "steps": 10, "max_parallel": 1},
            {"members": 8, "steps": 10, "max_parallel": 8, "progress": True},
            {"members": 8, "steps": 10, "max_parallel": 8, "slice_steps": 1},
            {"members": 8, "steps": 10, "max_parallel": 8, "slice_steps": 4},
            {"members": 8, "steps": 10, "max_parallel": 8, "slice_steps": 10},
            {"members": 8, "steps": 10, "max_parallel": 8, "saver": "teamgraph"},
            # NOTE: calls as long as a hosted model's (1-3 s): what the framework time costs there.
            MODEL_LIKE_PARALLEL,
        ],
        quick=[{"members": 8, "steps": 3, "max_parallel": 8, "latency_ms": [2, 8]}],
        repeats=2,
        description=parallel_workload.__doc__,
    ),
    "teamgraph-scale": Workload(
        scale_workload,
        full=[{"members": n, "rounds": 10} for n in (5, 20, 50)],
        quick=[{"members": 5, "rounds": 2}],
        repeats=2,
        description=scale_workload.__doc__,
    ),
    "teamgraph-cadence": Workload(
        cadence_workload, full=_cadence_params(), quick=[], timeout_s=900.0, description=cadence_workload.__doc__
    ),
}
