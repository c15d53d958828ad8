"""A local stand-in for the LangSmith API that counts the trace bytes it is sent.

`FakeLangSmith()` serves on 127.0.0.1 (a free port) in a background thread. It answers
`GET /info` (so the client uses its default batching) and accepts every run-ingest
request (`POST /runs`, `/runs/batch`, `/runs/multipart`, `PATCH /runs/<id>`), counting
request bodies as they arrive on the wire (compressed, if the client compressed them).
Point a process at it with `LANGSMITH_ENDPOINT=<url>`, `LANGSMITH_TRACING=true` and a dummy
`LANGSMITH_API_KEY`, then call `flush()` before reading `bytes_received`.

`breakdown()` splits the multipart bytes by run (name and run type) and by part
(``inputs``, ``outputs``, ``serialized``, ``extra``, ...): what a run's trace costs, and why.
"""

from __future__ import annotations

import json
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

INFO = {
    "version": "0.0.0-bench",
    "batch_ingest_config": {
        "size_limit": 100,
        "scale_up_nthreads_limit": 1,
        "scale_up_qsize_trigger": 1000,
        "scale_down_nempty_trigger": 4,
    },
}


PART_NAME = re.compile(rb'name="(post|patch)\.([0-9a-f-]+)(?:\.([a-z_]+))?"')
"""A multipart part's name: ``post.<run id>`` (the run, minus its big fields) or ``post.<run id>.inputs``."""


@dataclass
class RunBytes:
    """The bytes one traced run (or every run of one name and type) cost, by part."""

    name: str = "?"
    run_type: str = "?"
    runs: int = 0
    parts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def total(self) -> int:
        return sum(self.parts.values())


def multipart_parts(body: bytes, content_type: str) -> list[tuple[bytes, bytes]]:
    """The (Content-Disposition header line, payload) pairs of one multipart/form-data body."""
    match = re.search(r"boundary=([^;]+)", content_type)
    if match is None:
        return []
    out = []
    for chunk in body.split(b"--" + match.group(1).strip('"').encode()):
        head, sep, payload = chunk.partition(b"\r\n\r\n")
        if sep:
            out.append((head, payload.removesuffix(b"\r\n")))
    return out


class FakeLangSmith:
    """Counts LangSmith run-ingest bytes on a local HTTP server (a context manager)."""

    def __init__(self) -> None:
        self.bytes_received = 0
        self.requests = 0
        self.paths: dict[str, int] = {}
        self.runs: dict[str, RunBytes] = defaultdict(RunBytes)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _ingest(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size)
                path = self.path.split("?")[0]
                with fake._lock:
                    fake.bytes_received += size
                    fake.requests += 1
                    fake.paths[path] = fake.paths.get(path, 0) + size
                    if "multipart" in path:
                        fake._count_parts(body, self.headers)
                self._reply(202 if "multipart" in path else 200, {})

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._reply(200, INFO if self.path.startswith("/info") else {})

            do_POST = _ingest  # noqa: N815
            do_PATCH = _ingest  # noqa: N815

            def log_message(self, *args) -> None:  # quiet
                pass

        return Handler

    def _count_parts(self, body: bytes, headers) -> None:
        if headers.get("Content-Encoding") == "zstd":
            import zstandard

            body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        for head, payload in multipart_parts(body, headers.get("Content-Type", "")):
            match = PART_NAME.search(head)
            if match is None:
                continue
            op, run_id, key = match.group(1).decode(), match.group(2).decode(), match.group(3)
            run = self.runs[run_id]
            run.parts[key.decode() if key else op] += len(payload)
            if key is None and op == "post":
                record = json.loads(payload)
                run.name, run.run_type, run.runs = record.get("name", "?"), record.get("run_type", "?"), 1

    def breakdown(self) -> dict[str, RunBytes]:
        """Multipart bytes by ``"<run type> <name>"``, summed over that name's runs (uncompressed sizes)."""
        out: dict[str, RunBytes] = {}
        with self._lock:
            for run in self.runs.values():
                key = f"{run.run_type} {run.name}"
                total = out.setdefault(key, RunBytes(name=run.name, run_type=run.run_type))
                total.runs += run.runs
                for part, size in run.parts.items():
                    total.parts[part] += size
        return out

    def flush(self) -> None:
        """Wait until the tracers of this process have sent everything they hold."""
        from langchain_core.tracers.langchain import wait_for_all_tracers

        wait_for_all_tracers()

    def __enter__(self) -> FakeLangSmith:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
