"""A local stand-in for the LangSmith API that counts the trace bytes it is sent.

`FakeLangSmith()` serves on 127.0.0.1 (a free port) in a background thread. It answers
`GET /info` (so the client uses its default batching) and accepts every run-ingest
request (`POST /runs`, `/runs/batch`, `/runs/multipart`, `PATCH /runs/<id>`), counting
request bodies as they arrive on the wire (compressed, if the client compressed them).
Point a process at it with `LANGSMITH_ENDPOINT=<url>`, `LANGSMITH_TRACING=true` and a dummy
`LANGSMITH_API_KEY`, then call `flush()` before reading `bytes_received`.
"""

from __future__ import annotations

import json
import threading
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


class FakeLangSmith:
    """Counts LangSmith run-ingest bytes on a local HTTP server (a context manager)."""

    def __init__(self) -> None:
        self.bytes_received = 0
        self.requests = 0
        self.paths: dict[str, int] = {}
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
                self.rfile.read(size)
                path = self.path.split("?")[0]
                with fake._lock:
                    fake.bytes_received += size
                    fake.requests += 1
                    fake.paths[path] = fake.paths.get(path, 0) + size
                self._reply(202 if "multipart" in path else 200, {})

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._reply(200, INFO if self.path.startswith("/info") else {})

            do_POST = _ingest  # noqa: N815
            do_PATCH = _ingest  # noqa: N815

            def log_message(self, *args) -> None:  # quiet
                pass

        return Handler

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
