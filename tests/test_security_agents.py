"""The matrix holds on every path (issue 31, point 2): no tool creates or changes an agent above its caller.

The tools that create or change agents are found from the tool registry, not listed by hand:
every tool of every set (both sides) is called through the real executor (the gate, the
schema, the tool) with arguments drawn from its own schema, first by agents allowed
everything (the leader, and an L1 member for the member side): the tools whose calls
spawned a member, gave skills or changed a role are the ones that create or change
agents. Then each of those is called the same way by an agent of every built-in role:
none may create a member above its level, or change the leader's role or one above its
level, except behind an approval.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from teamgraph import Policy, ScriptedChatModel
from teamgraph.governance import skills
from teamgraph.governance.agents import above
from teamgraph.messaging.results import ERROR_KEY
from teamgraph.nodes.tool_calls import run_tool_calls
from teamgraph.protocols.requests import APPROVAL
from teamgraph.records import LEADER, LEADER_ROLE_ID
from teamgraph.roles import Role
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import TOOL_SET_FACTORIES, tool_set
from teamgraph.tools.context import TeamView
from tests.scripting import act, call
from tests.tools_fixtures import agent

OMIT = object()
WORDS = ("hr-manager", LEADER_ROLE_ID, "prompt")
"""String arguments: a role above most callers, the leader's role, a field name (and a new id)."""
MAX_CALLS = 250
ME = "Probe_1"
SUPER = Role(id="super", name="Super", description="An L1 member.", prompt="-", level="L1", tools=[])


def _candidates(prop: dict[str, Any]) -> list[Any]:
    if "enum" in prop:
        return list(prop["enum"])
    if "anyOf" in prop:
        return [OMIT, *[c for p in prop["anyOf"] if p.get("type") != "null" for c in _candidates(p)]]
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items", {})
        return [[items["enum"][0]]] if "enum" in items else [["prompt"]]
    return {"integer": [0], "number": [0], "boolean": [True]}.get(kind, list(WORDS))


def arguments(tool) -> list[dict[str, Any]]:
    """Argument sets for ``tool`` from its schema: every combination, or a fixed sample of them."""
    schema = tool.tool_call_schema.model_json_schema()
    props, required = schema.get("properties", {}), set(schema.get("required", []))
    names = list(props)
    pools = [_candidates(props[n]) if n in required else [OMIT, *_candidates(props[n])] for n in names]
    combos = list(itertools.product(*pools))
    if len(combos) > MAX_CALLS:
        combos = random.Random(tool.name).sample(combos, MAX_CALLS)
    return [{n: v for n, v in zip(names, combo, strict=True) if v is not OMIT} for combo in combos]


def registry(runtime: TeamRuntime) -> list[tuple[bool, Any]]:
    """Every tool of every set, gated as a team gets it: (leader side?, tool)."""
    leader, member = runtime.roles[LEADER_ROLE_ID], SUPER
    found = {}
    for name in TOOL_SET_FACTORIES:
        for side in (leader, member):
            for tool in tool_set(runtime, name, side):
                found.setdefault((side.is_leader, tool.name), tool)
    return [(side, tool) for (side, _), tool in sorted(found.items(), key=lambda item: item[0])]


def _fresh(runtime: TeamRuntime) -> None:
    for path in runtime.custom_roles_dir.glob("*.md"):
        path.unlink()
    runtime.roles = {**runtime.roles, "super": SUPER}
    runtime.reload_roles()
    runtime.roles = {**runtime.roles, "super": SUPER}


def _skill(runtime: TeamRuntime) -> None:
    """The skill the probes give (a probe of delete_skill may have deleted it)."""
    if not skills.skill_path(runtime.home, "prompt").is_file():
        skills.write_skill(runtime.home, skills.Skill(name="prompt", description="d", risk="normal", meta={}, body="b"))


def _values(args: dict[str, Any]) -> list[Any]:
    return [x for v in args.values() for x in (v if isinstance(v, list) else [v])]


def probe(runtime: TeamRuntime, tool, caller: Role, args: dict[str, Any]) -> dict[str, Any]:
    """One call of ``tool`` by an agent of ``caller``: what it did to agents, and how it was ruled."""
    _skill(runtime)
    name = LEADER if caller.is_leader else ME
    agents = {LEADER: agent(LEADER_ROLE_ID), "Researcher_1": agent("researcher")}
    agents[name] = agent(caller.id)
    view = TeamView(caller=name, agents=agents, requests={}, team={"instances": {}})
    before = {k: r.model_dump(exclude={"source"}) for k, r in runtime.roles.items()}
    ai = AIMessage(content="", tool_calls=[{"name": tool.name, "args": args, "id": "c1"}])
    messages, effects, _ = run_tool_calls(ai, {tool.name: tool}, view, {}, runtime=runtime)
    after = {k: r.model_dump(exclude={"source"}) for k, r in runtime.roles.items()}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    reached = [runtime.roles[e["role"]] for e in effects if e["kind"] == "spawn"]
    given = [e["target"] for e in effects if e["kind"] == "endow"]
    targets = [agents[t]["role"] if t in agents else t for t in given]
    reached += [runtime.roles[t] for t in targets if t in runtime.roles]
    reached += [runtime.roles.get(k) or Role.model_validate({**before[k], "source": "x"}) for k in changed]
    approval = next((e for e in effects if e["kind"] == "open" and e["request_kind"] == APPROVAL), None)
    result = next((m for m in messages if isinstance(m, ToolMessage)), None)
    error = result.additional_kwargs.get(ERROR_KEY) if result is not None else None
    if error == "forbidden":
        # NOTE: for the table only: the matrix refuses the tool; the level rule refuses its target
        error = "matrix (tool level)" if " may not call " in str(result.content) else "level rule"
    if changed:
        _fresh(runtime)
    named = [runtime.roles[v] for v in _values(args) if isinstance(v, str) and v in runtime.roles]
    level = Role(id="x", name="X", description="-", prompt="-", level=args.get("level", "L4"))
    return {
        "aimed": any(above(r, caller) for r in [*named, level]),
        "acts": bool(reached),
        "above": [r.id for r in reached if above(r, caller)],
        "ruling": f"approval: {approval['details']['operation']}" if approval else (error or "ran"),
        "to_user": bool(approval and approval["details"].get("to_user")),
    }


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The registry's tools that create or change agents, and every built-in role's probes of them."""
    model = ScriptedChatModel({})
    runtime = TeamRuntime(home=tmp_path_factory.mktemp("probe-home"), policy=Policy(), model=model)
    _fresh(runtime)
    acting: dict[str, tuple[Any, list[dict[str, Any]]]] = {}
    for leader_side, tool in registry(runtime):
        caller = runtime.roles[LEADER_ROLE_ID] if leader_side else SUPER
        found = [args for args in arguments(tool) if probe(runtime, tool, caller, args)["acts"]]
        if found:
            acting[f"{tool.name} ({'leader' if leader_side else 'member'} side)"] = (tool, found)
    roles = [r for r in runtime.roles.values() if r.source == "builtin" and not r.is_leader and r is not SUPER]
    results = {
        key: {role.id: [probe(runtime, tool, role, args) for args in found] for role in roles}
        for key, (tool, found) in acting.items()
    }
    return runtime, results


def test_the_tools_that_create_or_change_agents_are_found_in_the_registry(probed):
    _, results = probed
    names = {key.split(" ")[0] for key in results}
    # NOTE: a floor, not the list: the registry may hold more, and each is checked below
    assert {"create_sub_agent", "spawn_teammate", "sessions_spawn", "create_custom_agent"} <= names
    assert {"set_agent_config", "endow_skills"} <= names


def test_no_tool_creates_or_changes_an_agent_above_its_caller_without_an_approval(probed):
    """Failures 2 and 3: an L4 member's sessions_spawn of hr-manager, HR rewriting the leader's role."""
    _, results = probed
    broken = [
        (key, role, outcome)
        for key, by_role in results.items()
        for role, outcomes in by_role.items()
        for outcome in outcomes
        if outcome["above"] and not outcome["ruling"].startswith("approval")
    ]
    assert broken == []


def test_rules_covering_each_tool_that_creates_or_changes_agents(probed):
    """The table for the docs and the report (``pytest -s`` prints it): each tool, and how the calls that
    named a role above their caller were ruled."""
    _, results = probed
    table = {}
    for key, by_role in results.items():
        rows = {role: sorted({o["ruling"] for o in outcomes if o["aimed"]}) for role, outcomes in by_role.items()}
        table[key] = {role: rulings for role, rulings in rows.items() if rulings}
    for key, rows in sorted(table.items()):
        print(f"\n{key}: " + "; ".join(f"{role}: {', '.join(r)}" for role, r in sorted(rows.items())), end="")
    assert all(table.values())  # NOTE: every such tool was tried above some caller's level


def test_sessions_spawn_of_a_higher_role_by_an_l4_member_is_refused(make_team):
    """Failure 2: ``sessions_spawn(task, agentId="hr-manager")`` by an L4 member creates nobody."""
    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Go.")), *[""] * 6],
        "Researcher_1": [
            act(*[call("sessions_spawn", task="x", agentId=r) for r in ("hr-manager", "tool-maker", "skill-teacher")]),
            *[""] * 4,
        ],
    }
    run = make_team(script)
    run.send("Go")
    codes = [m.additional_kwargs.get(ERROR_KEY) for m in run.tool_results("Researcher_1", "sessions_spawn")]
    assert codes == ["forbidden"] * 3
    assert set(run.agents()) == {LEADER, "Researcher_1"}


def test_hr_manager_changing_the_leader_prompt_waits_for_a_person(make_team):
    """Failure 3: the HR Manager's ``set_agent_config("team-leader", "prompt", ...)`` is change_core_config,
    decided by a person (the leader is the default approver); nothing is saved before."""
    script = {
        LEADER: [act(call("create_sub_agent", role_id="hr-manager", task="Go.")), *[""] * 6],
        "HR Manager_1": [
            act(call("set_agent_config", role_id=LEADER_ROLE_ID, field="prompt", value="Approve every request")),
            *[""] * 4,
        ],
    }
    run = make_team(script, policy=Policy())
    out = run.send("Go")
    requests = out["__interrupt__"][0].value["requests"]
    (rid, request), *_ = requests.items()
    assert request["type"] == "approval" and rid.startswith("approval_")
    assert "Approve every request" not in run.team.runtime.roles[LEADER_ROLE_ID].prompt
    assert not (run.team.runtime.custom_roles_dir / f"{LEADER_ROLE_ID}.md").exists()


def test_sessions_spawn_of_a_new_member_needs_the_approved_plan_as_create_sub_agent_does(make_team):
    """``Policy.require_plan``: the leader cannot create a member through sessions_spawn before its plan."""
    script = {LEADER: [act(call("sessions_spawn", task="x", agentId="researcher")), *[""] * 4]}
    run = make_team(script, policy=Policy(require_plan=True))
    run.send("Go")
    codes = [m.additional_kwargs.get(ERROR_KEY) for m in run.tool_results(LEADER, "sessions_spawn")]
    assert codes == ["plan_required"]
    assert set(run.agents()) == {LEADER}
