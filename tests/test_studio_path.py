"""The README's Studio path, exactly as a user takes it: ``cp .env.example .env && langgraph dev``.

The repository's files are copied to a fresh folder (so the test neither reads nor writes
the developer's own ``.env``), the shipped ``.env.example`` becomes ``.env``, and
``langgraph dev`` starts there with its default flags (blocking-call detection and file
watching on) but a free port. The demo team's run must finish with the leader's report,
and the ``.py`` file an agent writes must not restart the server.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

langgraph_sdk = pytest.importorskip("langgraph_sdk")
from langgraph_sdk import get_sync_client  # noqa: E402

from tests.test_studio import _OFFLINE_ENV, _ONLINE_KEYS, _free_port, wait_until_ok  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 90
RELOADED = ("Reloading", "WatchFiles detected changes", "StatReload detected")


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        pytest.skip("not a git checkout: cannot copy the repository as shipped")
    return [line for line in out.stdout.splitlines() if line and (REPO / line).is_file()]


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    project = tmp_path_factory.mktemp("project")
    for name in _tracked_files():
        target = project / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    shutil.copy2(project / ".env.example", project / ".env")  # NOTE: `cp .env.example .env`
    user_home = tmp_path_factory.mktemp("user")
    env = {k: v for k, v in os.environ.items() if k not in _ONLINE_KEYS and not k.startswith("TEAMGRAPH_")}
    env.update(_OFFLINE_ENV, HOME=str(user_home))
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"  # NOTE: not in the watched folder
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--port", str(port)],
            cwd=project,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ok(
            url, process, name="langgraph dev", log_tail=lambda: log.read_text()[-3000:], timeout=START_TIMEOUT_S
        )
        yield url, log, user_home
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.slow  # NOTE: a `langgraph dev` server of its own
def test_the_readme_studio_path_runs_the_demo_team_to_its_report(studio: tuple[str, Path, Path]) -> None:
    url, log, user_home = studio
    client = get_sync_client(url=url)
    thread = client.threads.create()
    result = client.runs.wait(
        thread["thread_id"], "teamgraph", input={"messages": [{"role": "user", "content": "Build a login feature"}]}
    )
    assert isinstance(result, dict), result
    report = result["messages"][-1]
    assert report["type"] == "ai" and "login feature is built" in report["content"], result["messages"][-1]
    written = list((user_home / ".teamgraph" / "studio" / "project").rglob("*.py"))
    assert written, "the demo's engineer writes api/auth.py in the home, outside the served folder"
    text = log.read_text(encoding="utf-8", errors="replace")
    assert not any(word in text for word in RELOADED), text[-3000:]
    assert "BlockingError" not in text and "Blocking call" not in text, text[-3000:]
