"""Issue 31, failure 6: one redaction, on every surface that shows or writes a thread.

A run whose task, tool arguments and tool errors carry an Anthropic key, a URL with a
password, Basic and Bearer credentials; each surface (the log, each export format,
stats, ``teamgraph threads``, the resume hints, the CLI's errors) is read back and
must hold none of them.
"""

from __future__ import annotations

import json

import pytest
import sqlite_utils
from audit_fixtures import CONFIG, LEADER_TURN, log_lines, login_team
from scripting import act, call
from typer.testing import CliRunner

from teamgraph import Policy
from teamgraph.audit import flush_log
from teamgraph.audit.export import export_thread
from teamgraph.cli import app
from teamgraph.cli.errors import error_text, settings
from teamgraph.cli.threads import resume_command
from teamgraph.redaction import redact

ANTHROPIC_KEY = "sk-ant-api03-Zx9yQ8wR7vT6uS5"
URL_PASSWORD = "S3cr3tPw0rd"
DB_URL = f"postgresql://deploy:{URL_PASSWORD}@db.example:5432/app"
BASIC = "ZGVwbG95OmhvdW5kZG9n"
BEARER = "eyJhbGciOi.J9.xyzzy42"
SECRETS = (ANTHROPIC_KEY.removeprefix("sk-"), URL_PASSWORD, BASIC, BEARER)
TASK = f"{ANTHROPIC_KEY} deploys the app to {DB_URL}"

SCRIPT = {
    "Team Leader": [
        act(call("create_sub_agent", role_id="ui-operator", task=f"Deploy to {DB_URL}")),
        *[LEADER_TURN] * 8,
    ],
    "UI Operator_1": [
        act(call("write_file", path="deploy.sh", content=f"curl -H 'Authorization: Basic {BASIC}' {DB_URL}")),
        act(call("read_file", path=f"Bearer {BEARER}.txt")),  # fails: the error repeats the path
        "Deployed.",
    ],
}


def _assert_clean(text: str, surface: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{surface} shows {secret!r}"


@pytest.fixture(scope="module", params=[True, False], ids=["log-on", "log-off"])
def secret_run(request, tmp_path_factory):
    home = tmp_path_factory.mktemp("secrets") / "home"
    team = login_team(home, script=SCRIPT, policy=Policy(log=request.param))
    team.compile().invoke({"messages": [("user", TASK)]}, {"configurable": {"thread_id": "login"}})
    flush_log(team, CONFIG)
    return team


def test_redact_masks_keys_basic_bearer_and_url_passwords():
    text = f"{TASK} Authorization: Basic {BASIC} Authorization: Bearer {BEARER} x-api-key: k-123456789"
    masked = redact(text)
    _assert_clean(masked, "redact")
    assert "postgresql://deploy:***@db.example:5432/app" in masked and "k-123456789" not in masked
    assert (
        redact("a basic understanding of https://example.com/a@b") == "a basic understanding of https://example.com/a@b"
    )


def test_failure_6_the_log_masks_every_secret(secret_run):
    if not secret_run.runtime.policy.log:
        pytest.skip("the log is off")
    lines = log_lines(secret_run.home)
    assert len(lines) > 5
    _assert_clean("\n".join(lines), "the log")


@pytest.mark.parametrize("format", ["md", "json", "sqlite"])
def test_failure_6_each_export_masks_every_secret(secret_run, format, tmp_path):
    path = export_thread(secret_run, CONFIG, format=format, out=tmp_path / f"t.{format}")
    if format == "sqlite":
        db = sqlite_utils.Database(path)
        text = json.dumps({t: list(db[t].rows) for t in db.table_names()})
        assert db["log"].count > 0
    else:
        text = path.read_text(encoding="utf-8")
    _assert_clean(text, f"the {format} export")


def test_failure_6_stats_mask_every_secret(secret_run):
    stats = secret_run.stats(CONFIG)
    assert [p["count"] for p in stats["failing_patterns"]] == [1]
    _assert_clean(json.dumps(stats), "stats")
    result = CliRunner().invoke(app, ["stats", "login", "--json", "--home", str(secret_run.home)])
    assert result.exit_code == 0, result.output
    _assert_clean(result.stdout, "teamgraph stats")


def test_failure_6_teamgraph_threads_masks_the_task(secret_run):
    result = CliRunner().invoke(app, ["threads", "--home", str(secret_run.home)])
    assert result.exit_code == 0, result.output
    assert "sk-***" in result.stdout
    _assert_clean(result.stdout, "teamgraph threads")


def test_failure_6_resume_hints_mask_the_database_password(monkeypatch):
    monkeypatch.setitem(settings, "db", DB_URL)
    hint = resume_command("login", "home")
    assert hint.startswith("teamgraph --db") and "deploy:***@db.example" in hint
    _assert_clean(hint, "the resume hint")


def test_failure_6_cli_errors_mask_every_secret(tmp_path):
    message, code = error_text(ValueError(f"cannot reach {DB_URL} with Authorization: Basic {BASIC} ({TASK})"))
    assert code == 1 and "deploy:***@" in message
    _assert_clean(message, "an error line")
    result = CliRunner().invoke(app, ["--db", f"mysql://deploy:{URL_PASSWORD}@h/db", "threads"])
    assert result.exit_code == 2
    _assert_clean(result.output, "the --db usage error")
