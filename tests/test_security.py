"""Commands (issue 31, point 1): an allow-listed command can neither run the agents' code nor write outside.

Failure 1: with ``Policy(commands=("git status",))`` a member must not run its own code by
writing ``.git/config`` with a ``core.fsmonitor`` command and running ``git status``, nor by
``conftest.py`` + ``python -m pytest``; ``git diff --no-index --output=/any/path a b`` must not
write any file. Failure 13: ``Policy(commands=("python '",))`` is refused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from teamgraph import Policy
from teamgraph.governance import commands, sandbox
from teamgraph.messaging.envelopes import LEADER
from teamgraph.tools import errors
from tests.scripting import act, call, error_codes, quiet

EXE = sys.executable
MEMBER = "Code Reviewer_1"
HAS_GIT = shutil.which("git") is not None
HAS_SANDBOX = sandbox.bwrap_path() is not None


@pytest.mark.parametrize("entry", ["python '", "", "  ", "./build.sh"])
def test_policy_refuses_an_allow_list_entry_it_cannot_use(entry):
    with pytest.raises(ValidationError) as caught:
        Policy(commands=("git status", entry))
    (error,) = caught.value.errors()
    assert error["loc"] == ("commands",)
    assert repr(entry) in error["msg"]


def _git_repo(folder: Path, marker: Path) -> None:
    """A repository whose own config runs ``touch marker`` as its file-system monitor."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    with (folder / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = hooks\n")


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_git_fsmonitor_in_workspace_config_does_not_run(make_team, tmp_path):
    """The member cannot write .git/config (the file tools refuse .git) and the config already
    there does not run: git gets core.fsmonitor=false, hooksPath=/dev/null, no global config."""
    marker = tmp_path / "fsmonitor-ran"
    run = make_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="code-reviewer", task="Check.")), *quiet()],
            MEMBER: [
                act(
                    call("write_file", path=".git/config", content=f"[core]\n\tfsmonitor = touch {marker}\n"),
                    call("run_command", command="git status"),
                ),
                "Checked.",
            ],
        },
        policy=Policy(commands=("git status",)),
    )
    _git_repo(run.team.runtime.project_folder(run.config), marker)
    run.send("Go")
    assert error_codes(run, MEMBER, "write_file") == [errors.FORBIDDEN]
    assert run.tool_texts(MEMBER, "run_command")[0].startswith("exit code: 0")
    assert not marker.exists()
    assert run.requests() == {}


def test_git_diff_output_outside_waits_for_an_approval_and_writes_nothing(make_team, tmp_path):
    target = tmp_path / "victim.txt"
    run = make_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="code-reviewer", task="Diff.")), *quiet()],
            MEMBER: [act(call("run_command", command=f"git diff --no-index --output={target} a b")), "Done."],
        },
        policy=Policy(commands=("git diff",), approval="human"),
    )
    out = run.send("Go")
    (request,) = out["__interrupt__"][0].value["requests"].values()
    assert request["type"] == "approval"
    assert not target.exists()


@pytest.mark.parametrize(
    "command",
    [
        "git diff --output=x.txt",
        "git diff --no-index a /etc/passwd",
        "git -c core.pager=sh status",
        "git -C .. status",
        "git config core.fsmonitor true",
        "git status ../other",
        "git status ~/x",
    ],
)
def test_git_options_that_write_elsewhere_or_run_programs_wait_for_an_approval(command):
    allow = ("git",)
    assert commands.approval_reason(allow, command, sandboxed=True) is not None
    assert commands.approval_reason(allow, "git status --short", sandboxed=True) is None


@pytest.mark.parametrize("command", ["python -m pytest -q", "make test", "npm test", "./run.sh"])
def test_commands_that_run_workspace_code_wait_for_an_approval_without_a_sandbox(command):
    allow = ("python -m pytest", "make", "npm test", "./run.sh")
    assert commands.approval_reason(allow, command, sandboxed=False) is not None
    assert commands.approval_reason(allow, command, sandboxed=True) is None


def _conftest_team(make_team, marker: Path, command: str, policy: Policy):
    """A member writes a conftest.py that writes ``marker`` (outside the project), then runs ``command``."""
    conftest = f"open({str(marker)!r}, 'w').write('x')\n"
    return make_team(
        {
            LEADER: [act(call("create_sub_agent", role_id="code-reviewer", task="Test.")), *quiet()],
            MEMBER: [
                act(call("write_file", path="conftest.py", content=conftest), call("run_command", command=command)),
                "Done.",
            ],
        },
        policy=policy,
    )


def test_pytest_with_a_conftest_waits_for_an_approval_when_the_sandbox_is_off(make_team, tmp_path):
    marker = tmp_path / "conftest-ran"
    policy = Policy(commands=("python -m pytest",), sandbox="off", approval="human")
    out = _conftest_team(make_team, marker, "python -m pytest -q", policy).send("Go")
    (request,) = out["__interrupt__"][0].value["requests"].values()
    assert request["type"] == "approval"
    assert not marker.exists()


@pytest.mark.parametrize("command", ["cp evil.cfg .git/config", "tee sub/.git/hooks/pre-commit", "mv x --target=.git"])
def test_an_allow_listed_command_naming_a_git_folder_waits_for_an_approval(command):
    """Without the sandbox, cp/mv/tee could write .git/config (a filter or diff driver) for a later git."""
    assert commands.approval_reason(("cp", "tee", "mv"), command, sandboxed=True) is not None
    assert commands.approval_reason(("cp",), "cp a.txt b.txt", sandboxed=False) is None


def test_allow_list_words_may_be_patterns():
    assert commands.is_allowed(("git log -n *",), "git log -n 5")
    assert not commands.is_allowed(("git log -n *",), "git log --all")


def test_a_command_gets_a_clean_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    script = "import os; print(os.environ.get('OPENAI_API_KEY'), os.environ.get('GIT_CONFIG_GLOBAL'))"
    out = commands.run_command(f'{EXE} -c "{script}"', cwd=tmp_path)
    assert out.splitlines()[1] == f"None {Path('/dev/null')}"


@pytest.mark.skipif(not HAS_SANDBOX, reason="bubblewrap cannot make a sandbox here")
def test_a_sandboxed_command_writes_only_the_project_and_does_not_see_the_home(tmp_path):
    home = tmp_path / "home"
    project = home / "project" / "t1"
    project.mkdir(parents=True)
    (home / "teamgraph.sqlite").write_text("every message", encoding="utf-8")
    outside = tmp_path / "outside.txt"
    script = (
        "import os\n"
        f"open('inside.txt', 'w').write('x')\n"
        f"try: open({str(outside)!r}, 'w').write('x')\n"
        "except OSError as e: print('write refused', e.errno)\n"
        f"print('db visible', os.path.exists({str(home / 'teamgraph.sqlite')!r}))\n"
    )
    (project / "probe.py").write_text(script, encoding="utf-8")
    out = commands.run_command(f"{EXE} probe.py", cwd=project, sandboxed=True, hide=[home])
    # NOTE: the write outside lands in the sandbox's own /tmp (or is refused): never in the real one
    assert "db visible False" in out, out
    assert (project / "inside.txt").exists()
    assert not outside.exists()


@pytest.mark.skipif(not HAS_SANDBOX, reason="bubblewrap cannot make a sandbox here")
def test_pytest_allow_listed_runs_sandboxed_and_its_conftest_cannot_write_outside(make_team, tmp_path):
    marker = tmp_path / "conftest-ran"
    command = f"{EXE} -m pytest -q -p no:cacheprovider"
    run = _conftest_team(make_team, marker, command, Policy(commands=(f"{EXE} -m pytest",)))
    run.send("Go")
    assert run.requests() == {}  # NOTE: ran at once, in the sandbox
    assert run.tool_texts(MEMBER, "run_command")[0].startswith("exit code:")
    assert not marker.exists()
