"""Governance end to end: whole teams run with ScriptedChatModel through the permission matrix.

Sensitive calls stay open behind an ``approval`` request and act only once it is approved
(also when a new process resumes the thread); the task manager assigns work; skills are
endowed and read; ``run_command`` runs real subprocesses; each thread has its own files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from langchain_core.messages import SystemMessage
from scripting import act, call, error_codes, errors_of, on_message, quiet

from teamgraph import Policy
from teamgraph.governance import skills
from teamgraph.messaging.results import error_of
from teamgraph.roles import Role, write_role_file
from teamgraph.tools import errors

LEADER = "Team Leader"
EXE = sys.executable


def create(role_id: str, task: str | None = "Do your part.") -> dict:
    return call("create_sub_agent", role_id=role_id, task=task)


def skill(name: str, *, risk: str = "normal") -> skills.Skill:
    return skills.Skill(name=name, description=f"How to {name}.", risk=risk, meta={}, body=f"1. {name} carefully.")


# --- the matrix at run time -------------------------------------------------------------------


def test_a_custom_role_is_checked_on_every_call_and_may_not_exceed_its_level(run_team, team_home):
    run = run_team(
        {
            LEADER: [
                act(
                    call(
                        "create_custom_agent",
                        id="boss",
                        name="Boss",
                        description="Bosses.",
                        prompt="Boss.",
                        tools=["leader", "member"],
                        level="L4",
                    ),
                    call(
                        "create_custom_agent",
                        id="analyst",
                        name="Analyst",
                        description="Analyses.",
                        prompt="Analyse.",
                        tools=["member", "collaboration"],
                    ),
                ),
                act(create("analyst")),
                *quiet(),
            ],
            "Analyst_1": [
                act(call("assign_agent_work", agent="Analyst_1", task="x"), call("call_agent")),
                "Could not.",
            ],
        }
    )
    assert error_codes(run, LEADER) == [errors.BAD_ARGUMENT]
    assert "'leader'" in errors_of(run, LEADER)[0]  # NOTE: it names the tool set to remove
    assert "boss" not in run.team.roles and (team_home / "roles" / "analyst.md").is_file()
    refused, allowed = run.tool_results("Analyst_1")
    assert (refused.status, error_of(refused)) == ("error", errors.FORBIDDEN)
    assert "task-manager" in str(refused.content)  # NOTE: it says who may
    # call_agent is L4: the gate lets it through and the tool's own argument check answers.
    assert error_of(allowed) == errors.INVALID_CALL  # NOTE: no arguments: not refused by the matrix


def test_the_task_manager_assigns_work_and_keeps_the_board(run_team):
    tm, r1 = "Task Manager_1", "Researcher_1"
    prompts: list[str] = []
    run = run_team(
        {
            LEADER: [act(create("researcher", None), create("task-manager", "Organise the survey.")), *quiet()],
            tm: [
                act(
                    call("create_task", title="Survey", assignee=r1, priority="high"),
                    call("create_task", title="Report", depends_on=["task_1"]),
                    call("assign_agent_work", agent=r1, task="Do the survey.", task_name="Survey"),
                ),
                act(
                    call("set_task_status", task_id="task_1", status="in_progress", note="assigned"),
                    call("set_task_priority", task_id="task_2", priority="low"),
                    call("set_task_status", task_id="task_9", status="done"),
                ),
                act(call("list_tasks")),
                "Assigned.",
            ],
            r1: [lambda messages: prompts.append(messages[0].text) or "Survey done."],
        }
    )
    # The board reaches members' prompts without a plan, with each task's assignee (its work has started).
    shown = (
        "# Task board\n- task_1 [in_progress] Survey (Researcher_1)\n"
        "- task_2 [blocked] Report (any role) (after task_1)"
    )
    assert shown in prompts[0]
    assert run.tool_texts(tm, "assign_agent_work") == [f"Work assigned to {r1}."]
    assert "Do the survey." in run.inbox_texts(r1)[0] and f"Task from {tm}" in run.inbox_texts(r1)[0]
    assert run.tool_texts(tm, "create_task") == ["task_1 added (todo, high).", "task_2 added (blocked, normal)."]
    assert error_codes(run, tm) == [errors.UNKNOWN_TASK]
    board = {t["id"]: (t["title"], t["assignee"], t["priority"], t["status"]) for t in run.values["team"]["board"]}
    # NOTE: the board follows the work: the survey is done once its member ended its turn, and the report unblocked.
    assert board == {"task_1": ("Survey", r1, "high", "done"), "task_2": ("Report", None, "low", "todo")}
    assert run.tool_texts(tm, "list_tasks") == [
        f"task_2 [todo] (low) Report · unassigned after task_1\ntask_1 [done] (high) Survey · {r1} — assigned"
    ]


# --- sensitive operations wait for their decider -------------------------------------------------


def _prepare(home, operation: str):
    """The member, its call, and (before, after) checks of the operation's effect."""
    if operation == "delete_skill":
        skills.write_skill(home, skill("old-skill"))
        path = home / "skills" / "old-skill" / "SKILL.md"
        gone = call("delete_skill", name="old-skill")
        return "skill-teacher", gone, lambda: path.is_file(), lambda: not path.is_file()
    if operation == "create_high_risk_skill":
        path = home / "skills" / "wipe-disk" / "SKILL.md"
        made = call("create_skill", name="wipe-disk", description="Wipes a disk.", body="dd ...", risk="high")
        high = lambda: skills.read_skill(home, "wipe-disk")["risk"] == "high"  # noqa: E731
        return "skill-teacher", made, lambda: not path.is_file(), high
    if operation == "delete_agent":
        path = write_role_file(home / "roles", Role(id="analyst", name="Analyst", prompt="x"))
        return "hr-manager", call("delete_agent", role_id="analyst"), lambda: path.is_file(), lambda: not path.is_file()
    if operation == "change_core_config":
        path = home / "roles" / "researcher.md"
        change = call("set_agent_config", role_id="researcher", field="level", value="L3")
        return "hr-manager", change, lambda: not path.exists(), lambda: "level: L3" in path.read_text()
    made = home / "project" / "made.txt"
    command = call("run_command", command=f"{EXE} -c \"open('../made.txt', 'w').write('x')\"")
    return "full-stack-engineer", command, lambda: not made.exists(), lambda: made.read_text() == "x"


OPERATIONS = ["delete_skill", "create_high_risk_skill", "delete_agent", "change_core_config", "run_unlisted_command"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_each_sensitive_operation_pauses_for_its_decider_and_acts_only_after_approval(hitl_team, team_home, operation):
    role_id, sensitive, before, after = _prepare(team_home, operation)
    member = {"skill-teacher": "Skill Teacher_1", "hr-manager": "HR Manager_1"}.get(role_id, "Full-Stack Engineer_1")
    run = hitl_team(
        {LEADER: [act(create(role_id)), *quiet()], member: [act(sensitive), "Done."]},
        policy=Policy(approval="human"),
        fresh=True,
    )

    out = run.send("Go")

    request = run.interrupt_of(out)["requests"]["approval_1"]
    assert (request["type"], request["from"], request["operation"]) == ("approval", member, operation)
    assert request["call"]["tool"] == sensitive["name"] and request["call"]["context"]["caller"] == member
    assert before() and run.status(member) == "waiting" and run.tool_results(member) == []

    run.resume({"approval_1": {"approve": True, "feedback": "fine"}})

    assert after()
    (result,) = run.tool_texts(member, sensitive["name"])
    assert result.startswith("approval_1 approved by the user. Feedback: fine.\n") and "Error" not in result
    assert run.requests()["approval_1"]["status"] == "approved"


@pytest.mark.parametrize("operation", ["delete_skill", "run_unlisted_command"])
def test_an_approved_operation_runs_in_its_requesters_node_never_in_the_routers_pass(
    hitl_team, team_home, operation, monkeypatch
):
    """Issue 29 point 5: the pass records the approval; the requester's node performs the act."""
    from langgraph.config import get_config

    from teamgraph.governance import operations

    role_id, sensitive, before, after = _prepare(team_home, operation)
    member = {"skill-teacher": "Skill Teacher_1"}.get(role_id, "Full-Stack Engineer_1")
    performed_in: list[str] = []
    real = operations.perform

    def spy(runtime, tool, args, ctx):
        performed_in.append(get_config()["metadata"]["langgraph_node"])
        return real(runtime, tool, args, ctx)

    monkeypatch.setattr(operations, "perform", spy)
    run = hitl_team(
        {LEADER: [act(create(role_id)), *quiet()], member: [act(sensitive), "Done."]},
        policy=Policy(approval="human"),
        fresh=True,
    )
    run.send("Go")
    run.resume({"approval_1": {"approve": True, "feedback": "fine"}})

    assert after() and performed_in == [role_id]
    (result,) = run.tool_texts(member, sensitive["name"])
    assert result.startswith("approval_1 approved by the user. Feedback: fine.\n") and "Error" not in result
    assert "perform" not in run.values["team"] or run.values["team"]["perform"] == {}


def test_a_rejected_command_is_not_run_and_the_reason_comes_back(hitl_team, team_home):
    role_id, sensitive, before, _ = _prepare(team_home, "run_unlisted_command")
    member = "Full-Stack Engineer_1"
    run = hitl_team(
        {LEADER: [act(create(role_id)), *quiet()], member: [act(sensitive), "Not run."]},
        policy=Policy(approval="human"),
        fresh=True,
    )
    run.send("Go")
    run.resume({"approval_1": {"approve": False, "feedback": "not on this machine"}})
    assert before()
    assert run.tool_texts(member, "run_command") == [
        "approval_1 rejected by the user. Feedback: not on this machine. "
        "The operation run_unlisted_command (run_command) was not performed."
    ]


@pytest.mark.parametrize("decider", ["leader", "leader_then_human"])
def test_the_leader_decides_a_command_by_policy_and_a_person_confirms_when_asked(hitl_team, decider):
    member = "Full-Stack Engineer_1"
    review = act(call("review_plan", request_id="approval_1", approve=True, feedback="go"))
    run = hitl_team(
        {
            LEADER: [act(create("full-stack-engineer")), *[on_message({"approval_1": review})] * 8],
            member: [act(call("run_command", command=f"{EXE} -c 'print(6 * 7)'")), "Ran it."],
        },
        policy=Policy(approval=decider),
    )
    out = run.send("Go")
    if decider == "leader_then_human":
        assert run.interrupt_of(out)["requests"]["approval_1"]["leader_decision"] == {"approve": True, "feedback": "go"}
        assert run.tool_results(member) == []
        run.resume({"approval_1": {"approve": True}})
    (result,) = run.tool_texts(member, "run_command")
    assert result.endswith("\nexit code: 0\n42")


def test_the_master_acts_alone_unless_the_matrix_says_otherwise(hitl_team, team_home):
    make_role = call(
        "create_custom_agent",
        id="lead-dev",
        name="Lead Dev",
        description="Leads.",
        prompt="Lead.",
        tools=["member", "files", "admin"],
        level="L2",
    )
    run = hitl_team({LEADER: [act(make_role), *quiet()]}, fresh=True)
    run.send("Go")
    assert run.tool_texts(LEADER, "create_custom_agent")[0].startswith("Role 'lead-dev' (Lead Dev, level L2) created.")
    # permissions.yaml: the master's own core-config changes need a person too.
    (team_home / "permissions.yaml").write_text(
        "sensitive:\n  change_core_config:\n    tools: [set_agent_config, create_custom_agent]\n"
        "    when: core_config\n    master_alone: false\n"
    )
    again = call("create_custom_agent", id="ops", name="Ops", description="Ops.", prompt="Ops.", level="L3")
    run = hitl_team({LEADER: [act(again), *quiet()]}, fresh=True)
    out = run.send("Go")
    assert run.interrupt_of(out)["requests"]["approval_1"]["operation"] == "change_core_config"
    assert not (team_home / "roles" / "ops.md").exists()
    run.resume({"approval_1": {"approve": True}})
    assert (team_home / "roles" / "ops.md").is_file()


NEW_PROCESS = textwrap.dedent(
    """
    import json, sys
    from langgraph.types import Command
    from teamgraph import Policy, ScriptedChatModel, Team

    home, thread, script = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    team = Team(model=ScriptedChatModel(script), home=home, policy=Policy(approval="human"))
    config = {"configurable": {"thread_id": thread}}
    team.graph.invoke(Command(resume={"approval_1": {"approve": True}}), config)
    print(json.dumps([str(m.content) for m in team.history(config, "Skill Teacher_1")][-2:]))
    """
)


@pytest.mark.slow
def test_an_approval_given_from_a_new_process_performs_the_operation(hitl_team, team_home):
    skills.write_skill(team_home, skill("old-skill"))
    script = {
        LEADER: [act(create("skill-teacher")), *quiet()],
        "Skill Teacher_1": [act(call("delete_skill", name="old-skill")), "Deleted."],
    }
    run = hitl_team(script, policy=Policy(approval="human"), fresh=True)
    assert "approval_1" in run.interrupt_of(run.send("Go"))["requests"]
    thread = run.config["configurable"]["thread_id"]

    done = subprocess.run(
        [EXE, "-c", NEW_PROCESS, str(team_home), thread, json.dumps(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [
        "approval_1 approved by the user.\nSkill 'old-skill' deleted.",
        "Deleted.",
    ]
    assert not (team_home / "skills" / "old-skill").exists()


# --- skills, commands, project folders ----------------------------------------------------------


def test_skills_are_endowed_shown_in_the_prompt_and_read_on_demand(run_team, team_home):
    anthropic = team_home / "skills" / "pdf" / "SKILL.md"
    anthropic.parent.mkdir(parents=True)
    anthropic.write_text(
        "---\nname: pdf\ndescription: Fill PDF forms.\nlicense: MIT\nallowed-tools: [Read]\n---\n# PDF\nUse pypdf.\n"
    )
    prompts: list[str] = []

    def read(messages):
        prompts.append(next(m.text for m in messages if isinstance(m, SystemMessage)))
        return act(call("read_skill", name="release-notes"), call("list_skills"))

    teacher = "Skill Teacher_1"
    run = run_team(
        {
            LEADER: [act(create("skill-teacher")), act(create("researcher")), *quiet()],
            teacher: [
                act(
                    call(
                        "create_skill",
                        name="release-notes",
                        description="Write release notes from a diff.",
                        body="1. Read the diff.\n2. Group changes.",
                    ),
                    call("endow_skills", agent_or_role="researcher", skill_names=["release-notes", "pdf"]),
                    call("endow_skills", agent_or_role="nobody", skill_names=["pdf"]),
                ),
                "Skill written.",
            ],
            "Researcher_1": [read, "Followed it."],
        }
    )
    assert run.tool_texts(teacher, "endow_skills")[0] == "researcher now has: release-notes, pdf."
    assert error_codes(run, teacher) == [errors.UNKNOWN_AGENT]
    section = prompts[0][prompts[0].index("# Your skills") :]
    assert section.splitlines()[2:] == ["- release-notes: Write release notes from a diff.", "- pdf: Fill PDF forms."]
    body, listing = run.tool_texts("Researcher_1")
    assert body == (
        "# Skill: release-notes (risk: normal)\nWrite release notes from a diff.\n\n"
        "1. Read the diff.\n2. Group changes."
    )
    assert [s["name"] for s in json.loads(listing)] == ["pdf", "release-notes"]
    assert skills.read_skill(team_home, "pdf")["meta"] == {"license": "MIT", "allowed-tools": ["Read"]}


def test_an_allowed_command_runs_at_once_in_the_project_folder(make_team):
    member = "Code Reviewer_1"
    run = make_team(
        {
            LEADER: [act(create("code-reviewer")), *quiet()],
            member: [
                act(
                    call("run_command", command=f"{EXE} -c 'import os; print(os.getcwd())'"),
                    call("run_command", command=""),
                ),
                "Reviewed.",
            ],
        },
        policy=Policy(commands=(f"{EXE} -c",)),
    )
    run.send("Go")
    folder = run.team.runtime.project_folder(run.config)
    assert run.tool_texts(member, "run_command")[0] == f"exit code: 0\n{folder}"
    assert error_codes(run, member) == [errors.BAD_ARGUMENT]
    assert run.requests() == {}


def test_two_threads_files_are_kept_apart_and_absolute_paths_inside_are_accepted(make_team, team_home):
    def writer(text: str, thread: str):
        inside = team_home / "project" / thread / "abs.md"
        return {
            LEADER: [act(create("researcher")), *quiet()],
            "Researcher_1": [
                act(
                    call("write_file", path="notes.md", content=text),
                    call("write_file", path=str(inside), content=text),
                ),
                "Wrote.",
            ],
        }

    a = make_team(writer("from a", "thread-a"), thread="thread-a")
    a.send("Go")
    b = make_team(writer("from b", "thread-b"), thread="thread-b")
    b.send("Go")
    for thread, text in (("thread-a", "from a"), ("thread-b", "from b")):
        assert (team_home / "project" / thread / "notes.md").read_text() == text
        assert (team_home / "project" / thread / "abs.md").read_text() == text
