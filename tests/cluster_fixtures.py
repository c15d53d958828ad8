"""A real LangGraph API server cluster for the tests: PostgreSQL, Redis, replicas, a model server.

The replicas are ``langgraph-runtime-pg`` (the stock ``langgraph-api`` on PostgreSQL and
Redis) started with ``langhost serve`` from its own pinned virtual environment,
``.venv-cluster/`` at the repository's root (built on first use, then reused; git-ignored),
each serving the repository's ``langgraph.json`` with one home folder (the shared volume
every replica must mount: ``teamgraph/checkpoints/shared_home.py``) on one database and one
Redis. The model is the local OpenAI-protocol server (``tests/openai_server.py``) answering
``TeamJob``'s script with a latency.

Use ``cluster`` (a function fixture starting ``replicas`` replicas, stopped after the
test) from a test module with ``from cluster_fixtures import cluster, postgres_server  # noqa: F401``.
Tests using it are skipped, saying why, only when Redis or the server cannot be installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pg_fixtures import postgres_server  # noqa: F401

from tests.test_studio import wait_until_ok

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv-cluster"
PIN = "langhost==0.11.1.post1"
"""The server's pinned release (it pins ``langgraph-api==0.11.1``, so it gets its own environment)."""
HEARTBEAT_S = "10"
"""``LG_BG_JOB_HEARTBEAT``: a dead replica's runs are swept after a few heartbeats (default 120 s)."""
START_TIMEOUT_S = 120
LEADER = "Team Leader"
_TAG = re.compile(r"\[job ([\w-]+)\]")
_MEMBER = re.compile(r"# You are (.+?)\.\n")
_OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "PYTHONUNBUFFERED": "1",
}
_ONLINE_KEYS = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_CLOUD_LICENSE_KEY", "LANGSMITH_ENDPOINT")


class ClusterUnavailable(RuntimeError):
    """A part of the cluster cannot be installed or started here (the message says which)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the model: a two-member team's answers, by request content --------------------------


def tag_of(text: str) -> str:
    """The job tag a run's user message carries (``[job t07]``)."""
    found = _TAG.search(text)
    return found.group(1) if found else ""


@dataclass
class TeamJob:
    """The OpenAI-protocol answers of a team of a leader and researchers, stateless.

    The leader creates the researchers with the job's tag in their tasks; each writes a
    file and reports; once every report is in its conversation the leader reports. At
    most ``members + 1`` calls of a run are in flight at once. Every request is counted by
    (tag, agent, turn): the same key twice is a model call redone.

    Attributes:
        latency: Seconds each answer takes.
        members: How many researchers the leader creates.
        calls: Requests by (tag, agent, turn index).
    """

    latency: float = 2.0
    members: int = 2
    calls: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Any:
        messages = body["messages"]
        system = str(messages[0].get("content") or "")
        member = _MEMBER.search(system)
        agent = member.group(1) if member else LEADER
        text = "\n".join(str(m.get("content") or "") for m in messages[1:])
        tag, turn = tag_of(text), sum(1 for m in messages if m["role"] == "assistant")
        with self.lock:
            self.calls[(tag, agent, turn)] += 1
        time.sleep(self.latency)
        return self._leader(tag, turn, text) if agent == LEADER else self._member(agent, tag, turn)

    @property
    def roster(self) -> list[str]:
        """Every agent of a run, the leader first."""
        return [LEADER, *(f"Researcher_{n}" for n in range(1, self.members + 1))]

    def report(self, tag: str) -> str:
        """The leader's final report of a job."""
        return f"Report [job {tag}]: {' and '.join(self.roster[1:])} reported."

    def _leader(self, tag: str, turn: int, text: str) -> Any:
        if turn == 0:
            task = f"[job {tag}] Research part {{}} and report your findings."
            calls = [
                {"name": "create_sub_agent", "arguments": {"role_id": "researcher", "task": task.format(i)}}
                for i in range(1, self.members + 1)
            ]
            return {"content": None, "tool_calls": calls}
        if all(f"Findings of {name}" in text for name in self.roster[1:]):
            return self.report(tag)
        return ""

    @staticmethod
    def _member(agent: str, tag: str, turn: int) -> Any:
        if turn == 0:
            note = {"path": f"notes-{agent}.md", "content": f"{agent} on {tag}"}
            return {"content": None, "tool_calls": [{"name": "write_file", "arguments": note}]}
        return f"Findings of {agent} for [job {tag}]: done."

    def redone(self, tag: str) -> int:
        """Model calls of ``tag``'s run made again (a request seen before)."""
        with self.lock:
            return sum(n - 1 for (t, _, _), n in self.calls.items() if t == tag and n > 1)


# --- the servers ------------------------------------------------------------------------------


def cluster_bin() -> Path:
    """The pinned server environment's ``bin`` folder, built (with teamgraph) on first use.

    Raises:
        ClusterUnavailable: The environment cannot be built (no network, no pip).
    """
    stamp = VENV / "teamgraph-pin.txt"
    if stamp.exists() and stamp.read_text().strip() == PIN and (VENV / "bin" / "langhost").exists():
        return VENV / "bin"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True, capture_output=True)
        pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True, capture_output=True, timeout=600)
        subprocess.run([*pip, PIN, "-e", str(REPO)], check=True, capture_output=True, timeout=1200)
    except (OSError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        raise ClusterUnavailable(f"cannot build {VENV} with {PIN}: {e} {detail[-400:]!r}") from e
    stamp.write_text(PIN + "\n")
    return VENV / "bin"


def redis_binary() -> str:
    """Debian's ``redis-server``.

    Raises:
        ClusterUnavailable: It is not installed.
    """
    binary = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin")
    if binary is None:
        raise ClusterUnavailable("no redis-server: install Debian's `redis-server` package")
    return binary


def start_redis(folder: Path) -> tuple[str, Callable[[], None]]:
    """A throwaway Redis on a loopback port (Debian's ``redis-server``); its URL and how to stop it."""
    binary = redis_binary()
    port, pidfile = free_port(), folder / "redis.pid"
    options = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "yes"]
    subprocess.run([binary, *options, "--pidfile", str(pidfile), "--dir", str(folder)], check=True, timeout=30)
    deadline = time.monotonic() + 30
    while not pidfile.exists():
        if time.monotonic() > deadline:
            raise ClusterUnavailable("redis-server did not start")
        time.sleep(0.05)

    def stop() -> None:
        try:
            os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass

    return f"redis://127.0.0.1:{port}", stop


def server_config(folder: Path) -> Path:
    """The repository's ``langgraph.json`` with absolute paths, written into ``folder``."""
    config = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))
    config["graphs"] = {
        gid: f"{(REPO / spec.split(':')[0]).resolve()}:{spec.split(':')[1]}" for gid, spec in config["graphs"].items()
    }
    config["dependencies"] = [str((REPO / d).resolve()) if d.startswith(".") else d for d in config["dependencies"]]
    config.pop("env", None)  # NOTE: the replicas get their settings from their environment
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


@dataclass
class Replica:
    """One ``langhost serve`` process."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the replica's process group (its server and workers)."""
        os.killpg(self.process.pid, sig)

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                self.signal(sig)
            except ProcessLookupError:
                return
        self.process.wait(timeout=30)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Cluster:
    """Replicas of one LangGraph API server on one PostgreSQL database and one Redis.

    Attributes:
        database: The PostgreSQL URL the replicas share.
        redis: The Redis URL they share.
        model_url: The OpenAI-protocol server's base URL.
        job: The model's script (its calls are counted).
        folder: Where the replicas' logs and configs are, and their shared home (``home``).
    """

    database: str
    redis: str
    model_url: str
    job: TeamJob
    folder: Path
    jobs_per_worker: int = 20
    replicas: list[Replica] = field(default_factory=list)

    def start_replica(self, name: str, *, home: Path | None = None, wait: bool = True) -> Replica:
        """Start one more replica and wait until it answers.

        Args:
            name: The replica's name (its folder under ``folder``).
            home: Its ``TEAMGRAPH_HOME`` (default: the shared one, ``folder/home``).
            wait: Wait until it answers (False: a replica expected not to start).
        """
        bin_dir, port = cluster_bin(), free_port()
        folder = self.folder / name
        folder.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in _ONLINE_KEYS and not k.startswith("VIRTUAL_ENV")}
        env.update(_OFFLINE_ENV)
        env.update(
            {
                "TEAMGRAPH_MODEL": "openai:gpt-test",
                "OPENAI_BASE_URL": self.model_url,
                "OPENAI_API_KEY": "test-key",
                "TEAMGRAPH_HOME": str(home or self.folder / "home"),
                "LG_BG_JOB_HEARTBEAT": HEARTBEAT_S,
                # NOTE: the server's Redis pool (64 by default) runs out at 60 runs on one replica.
                "REDIS_MAX_CONNECTIONS": "1000",
                "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            }
        )
        argv = [str(bin_dir / "langhost"), "serve", "--no-browser", "--host", "127.0.0.1", "--port", str(port)]
        argv += ["--n-jobs-per-worker", str(self.jobs_per_worker), "--config", str(server_config(folder))]
        argv += ["--database-uri", self.database, "--redis-uri", self.redis, "--server-log-level", "warning"]
        log = folder / "server.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                argv, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        replica = Replica(name, f"http://127.0.0.1:{port}", process, log)
        self.replicas.append(replica)
        if wait:
            _wait_ready(replica)
        return replica

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()


def _wait_ready(replica: Replica) -> None:
    wait_until_ok(replica.url, replica.process, name=replica.name, log_tail=replica.log_tail, timeout=START_TIMEOUT_S)


def create_database(server_url: str) -> str:
    """A new database on the PostgreSQL server at ``server_url``; its URL."""
    import psycopg

    name = f"cluster_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


def forked_threads(database: str) -> list[str]:
    """Threads with a checkpoint that has two children (two writers went on from one parent)."""
    import psycopg

    sql = (
        "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = '' AND parent_checkpoint_id IS NOT NULL "
        "GROUP BY thread_id, parent_checkpoint_id HAVING COUNT(*) > 1"
    )
    with psycopg.connect(database, autocommit=True) as conn:
        return [str(row[0]) for row in conn.execute(sql).fetchall()]


def start_cluster(
    postgres: str, *, replicas: int, latency: float, members: int = 2, jobs_per_worker: int = 20
) -> Iterator[Cluster]:
    """Start a cluster of ``replicas`` replicas on a new database of ``postgres``; stop it after.

    Raises:
        ClusterUnavailable: Redis or the server environment is missing.
    """
    sys.path.insert(0, str(REPO / "tests"))
    from openai_server import ScriptedOpenAIServer

    folder = Path(tempfile.mkdtemp(prefix="teamgraph-cluster-"))
    cluster_bin()
    redis, stop_redis = start_redis(folder)
    job = TeamJob(latency=latency, members=members)
    server = ScriptedOpenAIServer(job).start()
    cluster = Cluster(create_database(postgres), redis, server.base_url, job, folder, jobs_per_worker)
    try:
        for n in range(replicas):
            cluster.start_replica(f"replica-{n + 1}")
        yield cluster
    finally:
        cluster.stop()
        server.stop()
        stop_redis()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def cluster(request: pytest.FixtureRequest, postgres_server: str) -> Iterator[Cluster]:  # noqa: F811
    """A running cluster; skipped only if Redis or the server cannot be installed.

    Indirect parameters (``@pytest.mark.parametrize("cluster", [{...}], indirect=True)``):
    ``replicas`` (2), the model's ``latency`` (2 s), the team's ``members`` (2).
    """
    options = getattr(request, "param", None) or {}
    try:
        redis_binary()
        cluster_bin()
    except ClusterUnavailable as e:
        pytest.skip(str(e))
    yield from start_cluster(
        postgres_server,
        replicas=options.get("replicas", 2),
        latency=options.get("latency", 2.0),
        members=options.get("members", 2),
    )
