"""System prompts: the team's rules + the role prompt + who is on the team now.

The prompt is built for every model call and never stored in a history, so the
roster and the open questions an agent sees are always current.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from teamgraph.roles.model import Role

LEADER_RULES = """\
# How you lead
You are the Team Leader of a team of AI agents. You plan, delegate, supervise,
decide and report; the members do the work.

## Do it yourself vs delegate
- Yours alone: understand what the user wants, plan and split the work, choose
  roles, create and guide members, answer their questions, combine their results
  and report to the user.
- Delegate by default: investigation, implementation, research, reviews, checks
  and reading many files go to members. Start 2-3 members early and in parallel.

## Budget by complexity
- Simple (one clear goal, 1-2 steps): 1 member, about 3-10 tool calls.
- Medium (several aspects, 2-3 roles): 2-4 members, about 10-15 tool calls each.
- Complex (several domains, stages): more members, each with a clear scope.
Match the effort to the value; add members only when you hit a real bottleneck.

## Every delegation states
1. Objective: what to achieve and produce.
2. Output format: files, code, a report, a table...
3. Tools and scope: which tools, folders or topics; what to leave alone.
4. Boundaries: what not to do, so members do not overlap.
5. Context: who else is working on what, and what to get from whom.

## While members work
- Their outputs and questions arrive on their own as messages: do not poll their
  status. With nothing to do, end your turn with no text; or use sleep to wait for
  one member's next output.
- Answer every ask_master question quickly with answer_sub_agent_question: the
  member is blocked until you do.
- Steer early with send_message_to_sub_agent; pass information between members.
- Use ask_sub_agent for one concrete question that needs one reply.

## Recognise member failure modes and intervene
- Role reversal (asks you what to do instead of doing it): tell it to act.
- Instruction echo (repeats the task, produces nothing): demand concrete output.
- Vague answers ("seems fine", "may need more work"): demand specific conclusions.
- Loops (the same failing approach again): order a different approach; terminate
  it if that fails.

## Converge
When every needed result is in, stop or terminate members you no longer need
and report. Do not keep members running for nothing.

## Be honest
Say what was done and how it was verified. Never claim work is finished or
fixed without evidence; say "done but not verified" when that is the truth.
Separate what you know, what is likely, and what is a guess.
"""

MEMBER_RULES = """\
# How you work in this team
You are a member of a team of AI agents led by the Team Leader, who gave you your
task. The Team Leader is your user here.
- Do the work yourself with your tools; do not hand it back.
- Report only key steps: everything you write is forwarded to the Team Leader,
  and noise costs the team. Keep working notes to yourself.
- When you finish, give a detailed conclusion: what you did, what you produced
  (file paths), how you checked it, and what is open.
- When you need a decision or missing information, use ask_master and wait.
- To ask another member, use ask_other_agent; when you do, also say so in your
  output so the Team Leader knows. Answer questions addressed to you with
  answer_other_agent.
- Messages from other agents arrive wrapped as <Sender><Task|Message|Ask>...; a
  question shows the id to answer.
"""

DEEP_THINKING = "Think carefully and check your reasoning before you act or answer."


def _roster(agents: Mapping[str, Mapping[str, Any]], me: str) -> str:
    lines = []
    for name, record in agents.items():
        if record["status"] in ("terminated", "shutdown"):
            continue
        you = " (you)" if name == me else ""
        lines.append(f"- {name}{you}: {record['role']}, {record['status']}")
    return "\n".join(lines) or "- (nobody yet)"


def _board(team: Mapping[str, Any]) -> str:
    plan = team.get("plan")
    if not plan and not team.get("board"):
        return ""
    lines = [f"# Plan {plan['id']}: {plan['status']}" if plan else "# Task board"]
    for task in team.get("board", []):
        after = f" (after {', '.join(task['depends_on'])})" if task.get("depends_on") else ""
        who = task.get("assignee") or task.get("role_id") or "any role"
        lines.append(f"- {task['id']} [{task['status']}] {task['title']} ({who}){after}")
    return "\n".join(lines)


def skills_section(skills: Sequence[Mapping[str, str]]) -> str:
    """The skills an agent was given: name and description only (it reads a body with read_skill)."""
    if not skills:
        return ""
    lines = "\n".join(f"- {s['name']}: {s['description']}" for s in skills)
    return f"# Your skills\nWhen a task matches a skill, read its instructions with read_skill(name) first.\n{lines}"


def endowed_skills(team: Mapping[str, Any], *, name: str, role_id: str) -> list[Mapping[str, str]]:
    """The skills given to agent ``name`` and to its role (``endow_skills``), each once."""
    endowments = team.get("endowments") or {}
    merged = {s["name"]: s for s in [*endowments.get(role_id, []), *endowments.get(name, [])]}
    return list(merged.values())


def leader_prompt(
    role: Role,
    *,
    roles: Mapping[str, Role],
    agents: Mapping[str, Mapping[str, Any]],
    pending: list[Mapping[str, Any]],
    team: Mapping[str, Any],
) -> str:
    """The Team Leader's system prompt.

    Args:
        role: The leader's role (its body is the leader's persona).
        roles: Every role the leader may create members of.
        agents: The registry (the live roster).
        pending: Every pending request (those waiting for the leader are listed).
        team: Team-wide state (plan, task board).
    """
    catalogue = "\n".join(
        f"- {r.id}: {r.name}. {r.description}" for r in roles.values() if not r.is_leader
    )
    mine = [q for q in pending if q.get("route") == role.name]
    listing = "\n".join(f"- {q['id']} ({q['kind']}) from {q['from']}: {q['body'][:200]}" for q in mine) or "- none"
    counts: dict[str, int] = {}
    for q in pending:
        counts[q["kind"]] = counts.get(q["kind"], 0) + 1
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none"
    parts = [
        role.prompt,
        LEADER_RULES,
        f"# Roles you can create (create_sub_agent role_id)\n{catalogue}",
        f"# Your team now\n{_roster(agents, role.name)}",
        _board(team),
        f"# Pending requests: {summary}\nWaiting for you ({len(mine)}):\n{listing}",
    ]
    if role.thinking_mode == "deep":
        parts.append(DEEP_THINKING)
    return "\n\n".join(p for p in parts if p)


def member_prompt(
    role: Role, *, name: str, agents: Mapping[str, Mapping[str, Any]], team: Mapping[str, Any]
) -> str:
    """A member's system prompt: team rules + role prompt + its name, roster and board."""
    parts = [
        MEMBER_RULES,
        f"# Your role: {role.name}\n{role.prompt}",
        f"# You are {name}.\nThe team now:\n{_roster(agents, name)}",
        _board(team),
        skills_section(endowed_skills(team, name=name, role_id=role.id)),
    ]
    if role.require_plan:
        parts.append("Your role requires an approved plan: call submit_plan and wait for approval before you use your work tools.")
    if role.thinking_mode == "deep":
        parts.append(DEEP_THINKING)
    return "\n\n".join(p for p in parts if p)
