"""Priority scheduling under ``max_parallel`` contention (collaboration spec §3.3: allocate by task priority).

Two members are runnable at once and only one may step: the one whose task is more
urgent goes first; the other is not starved (``Policy.priority_aging``).
"""

from __future__ import annotations

from scripting import act, call

from teamgraph import Policy
from teamgraph.records import LEADER

LOW, URGENT = "Researcher_1", "Researcher_2"


def _member(name: str, steps: int, order: list[str]):
    """A member that works ``steps`` model calls (one note each), recording each call in ``order``."""

    def play(messages):
        order.append(name)
        done = sum(1 for m in messages if getattr(m, "tool_calls", None))
        note = call("write_file", path=f"{name}/{done}.md", content="note")
        return act(note) if done < steps - 1 else f"{name} done."

    return [play] * steps


def _leader():
    return [
        act(call("create_sub_agent", role_id="researcher"), call("create_sub_agent", role_id="researcher")),
        act(
            call("create_task", title="Tidy notes", assignee=LOW, priority="low"),
            call("create_task", title="Fix the outage", assignee=URGENT, priority="urgent"),
        ),
        act(
            call("send_message_to_sub_agent", display_name=LOW, message="Start."),
            call("send_message_to_sub_agent", display_name=URGENT, message="Start."),
        ),
        *[""] * 6,
    ]


def _run(make_team, *, low_steps: int, urgent_steps: int, aging: int = 4) -> list[str]:
    order: list[str] = []
    script = {
        LEADER: _leader(),
        LOW: _member(LOW, low_steps, order),
        URGENT: _member(URGENT, urgent_steps, order),
    }
    run = make_team(script, policy=Policy(max_parallel=1, scheduling="lockstep", priority_aging=aging))
    run.send("Go")
    assert {run.status(LOW), run.status(URGENT)} == {"idle"}
    return order


def test_the_urgent_task_steps_first_under_contention(make_team):
    """Collaboration spec §3.3: with one slot, the urgent member runs before the low one (created first)."""
    order = _run(make_team, low_steps=2, urgent_steps=3)
    assert order == [URGENT] * 3 + [LOW] * 2


def test_a_low_priority_member_is_not_starved(make_team):
    """Collaboration spec §3.3 with aging: a long urgent task does not keep the low one waiting until it ends."""
    order = _run(make_team, low_steps=2, urgent_steps=30, aging=2)
    assert order[0] == URGENT
    assert order.index(LOW) < len(order) - 2 - order[::-1].index(URGENT)  # NOTE: low runs before urgent's last
    assert order.count(LOW) == 2 and order.count(URGENT) == 30
