"""A local HTTP server speaking the OpenAI Chat Completions protocol, for tests.

Tests drive the real ``langchain_openai.ChatOpenAI`` client over real HTTP
against this server, which answers from a *script* instead of a model::

    with ScriptedOpenAIServer(["Hello!"]) as server:
        llm = ChatOpenAI(model="gpt-test", base_url=server.base_url, api_key="test")
        assert llm.invoke("hi").content == "Hello!"
        assert server.requests[0]["model"] == "gpt-test"

A script is either a list of responses consumed in order, or a callable
``(request_body: dict) -> response`` called once per request. A response is:

* a ``str`` -> an assistant message with that content;
* ``{"content": str | None, "tool_calls": [{"name": str, "arguments": dict | str}]}``
  -> an assistant message with tool calls (ids ``call_1``, ``call_2``, ... unless
  a tool call gives its own ``"id"``); dict arguments are JSON-encoded, a str is
  sent verbatim (so a test can send malformed JSON);
* ``{"error": {"status": 500 | 429 | 400, "message": str, "retry_after": float, "code": str}}``
  -> that HTTP status with an OpenAI-style error body (``code`` overrides the
  status's default code), plus ``retry-after`` / ``retry-after-ms`` headers when
  ``retry_after`` is given.

With ``context_limit=N`` a request whose prompt is longer than N tokens (counted
as whitespace-separated words of the messages' contents and tool-call arguments)
is refused like OpenAI does: HTTP 400, code ``context_length_exceeded``. It is
recorded in ``requests`` (and ``refused``) but consumes no scripted response.

When a list script runs out (or a callable raises), the server answers HTTP 500
with ``x-should-retry: false`` so the client fails at once, visibly.
Requests with ``"stream": true`` are answered as Server-Sent Events.
Only the standard library is used.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Response = str | dict[str, Any]
Script = Sequence[Response] | Callable[[dict[str, Any]], Response]

#: ``type`` and ``code`` fields of the error body, by HTTP status.
_ERROR_KINDS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    503: ("server_error", "service_unavailable"),
}


class ScriptExhausted(Exception):
    """Raised internally when a list script has no response left."""


class ScriptedOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 answering from a script.

    Use it as a context manager (or call :meth:`start` / :meth:`stop`).
    ``base_url`` is the value for ``ChatOpenAI(base_url=...)``; ``requests``
    lists the parsed JSON bodies of every chat completion request received,
    including those answered with an error.
    """

    def __init__(self, script: Script, *, model_id: str = "gpt-test", context_limit: int | None = None) -> None:
        """Prepare a server for ``script``; ``model_id`` is listed by ``GET /v1/models``;
        ``context_limit`` refuses longer prompts with ``context_length_exceeded``."""
        self.requests: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.usages: list[dict[str, int]] = []
        """The ``usage`` objects the server reported (a stream reports one only when asked to)."""
        self.model_id = model_id
        self.context_limit = context_limit
        self._script = script
        self._remaining: Iterator[Response] | None = None if callable(script) else iter(list(script))
        self._lock = threading.Lock()
        self._call_ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------

    def start(self) -> ScriptedOpenAIServer:
        """Bind a free port on 127.0.0.1 and serve from a daemon thread."""
        if self._httpd is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"scripted": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedOpenAIServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and join the thread."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port (only while started)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedOpenAIServer is not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, e.g. ``http://127.0.0.1:54321/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script -----------------------------------------------------------

    def next_response(self, body: dict[str, Any]) -> Response:
        """Record ``body`` and return the scripted response for it."""
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            tokens = prompt_tokens(body)
            if self.context_limit is not None and tokens > self.context_limit:
                self.refused.append(body)
                return {
                    "error": {
                        "status": 400,
                        "code": CONTEXT_LENGTH_EXCEEDED,
                        "message": (
                            f"This model's maximum context length is {self.context_limit} tokens. However, your "
                            f"messages resulted in {tokens} tokens. Please reduce the length of the messages."
                        ),
                    }
                }
            if self._remaining is not None:
                response = next(self._remaining, None)
                if response is None:
                    raise ScriptExhausted(
                        f"ScriptedOpenAIServer script exhausted: request #{number} has no scripted response"
                    )
                return response
        return self._script(body)  # type: ignore[operator]  # callable, unlocked

    def new_call_id(self) -> str:
        """Return the next tool call id: ``call_1``, ``call_2``, ..."""
        with self._lock:
            return f"call_{next(self._call_ids)}"


# -- building OpenAI payloads ---------------------------------------------


def _normalize(server: ScriptedOpenAIServer, response: Response) -> dict[str, Any]:
    """Turn a scripted response into ``{"content", "tool_calls"}`` wire form."""
    if isinstance(response, str):
        return {"content": response, "tool_calls": []}
    if not isinstance(response, dict):
        raise TypeError(f"unsupported scripted response: {response!r}")
    tool_calls = []
    for call in response.get("tool_calls") or []:
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        tool_calls.append(
            {
                "id": call.get("id") or server.new_call_id(),
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments},
            }
        )
    return {"content": response.get("content"), "tool_calls": tool_calls}


def _count_tokens(text: str) -> int:
    """A rough, deterministic token count: whitespace-separated words."""
    return len(text.split())


CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"


def prompt_tokens(body: dict[str, Any]) -> int:
    """The request's prompt tokens as this server counts them (words; 1 for non-text content)."""
    total = 0
    for m in body.get("messages", []):
        total += _count_tokens(m["content"]) if isinstance(m.get("content"), str) else 1
        total += sum(_count_tokens(tc["function"]["arguments"]) for tc in m.get("tool_calls") or [])
    return total


def _usage(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, int]:
    """Compute a plausible ``usage`` object for a request and its reply."""
    prompt = prompt_tokens(body)
    completion = _count_tokens(reply["content"] or "") + sum(
        _count_tokens(tc["function"]["arguments"]) + 1 for tc in reply["tool_calls"]
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _finish_reason(reply: dict[str, Any]) -> str:
    return "tool_calls" if reply["tool_calls"] else "stop"


def _completion(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """A full ``chat.completion`` object."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply["content"],
        "refusal": None,
    }
    if reply["tool_calls"]:
        message["tool_calls"] = reply["tool_calls"]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "gpt-test"),
        "system_fingerprint": "fp_scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(reply),
            }
        ],
        "usage": _usage(body, reply),
    }


def _split_words(text: str) -> list[str]:
    """Split ``text`` into word-sized pieces that concatenate back to it."""
    return [piece for piece in re.findall(r"\S*\s*", text) if piece]


def _split_in_pieces(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into up to ``parts`` non-empty slices (2+ when len >= 2)."""
    cuts = [len(text) * i // parts for i in range(parts + 1)]
    pieces = [text[a:b] for a, b in itertools.pairwise(cuts)]
    return [p for p in pieces if p] or [text]


def _chunks(body: dict[str, Any], reply: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects streaming ``reply``."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "gpt-test"),
        "system_fingerprint": "fp_scripted",
    }
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out = {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            out["usage"] = None
        return out

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for word in _split_words(reply["content"] or ""):
        yield chunk({"content": word})
    for index, call in enumerate(reply["tool_calls"]):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in _split_in_pieces(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(reply))
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(body, reply)}


def _error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body."""
    default = ("server_error" if status >= 500 else "invalid_request_error", None)
    kind, default_code = _ERROR_KINDS.get(status, default)
    param = "messages" if code else None
    return {"error": {"message": message, "type": kind, "param": param, "code": code or default_code}}


# -- HTTP -----------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    """Serves ``POST /v1/chat/completions`` and ``GET /v1/models``."""

    scripted: ScriptedOpenAIServer  # set on the per-server subclass
    server_version = "ScriptedOpenAI/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Keep test output quiet."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            model = {"id": self.scripted.model_id, "object": "model", "created": 0, "owned_by": "teamgraph-tests"}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_json(404, _error_body(404, f"Unknown path {self.path}"))

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, _error_body(404, f"Unknown path {self.path}"))
            return
        try:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
        except (ValueError, json.JSONDecodeError) as exc:
            self._send_json(400, _error_body(400, f"Invalid JSON body: {exc}"))
            return
        try:
            response = self.scripted.next_response(body)
            if isinstance(response, dict) and "error" in response:
                self._send_error(response["error"])
                return
            reply = _normalize(self.scripted, response)
        except Exception as exc:  # exhausted script, failing callable, bad response
            self._send_json(
                500,
                _error_body(500, f"{type(exc).__name__}: {exc}"),
                {"x-should-retry": "false"},
            )
            return
        if not body.get("stream") or (body.get("stream_options") or {}).get("include_usage"):
            self.scripted.usages.append(_usage(body, reply))
        if body.get("stream"):
            self._send_stream(_chunks(body, reply))
        else:
            self._send_json(200, _completion(body, reply))

    def _send_error(self, error: dict[str, Any]) -> None:
        """Answer a scripted ``{"error": {...}}`` response."""
        status = int(error.get("status", 500))
        headers = {}
        if error.get("retry_after") is not None:
            seconds = float(error["retry_after"])
            headers["retry-after"] = f"{seconds:g}"
            headers["retry-after-ms"] = f"{seconds * 1000:g}"
        body = _error_body(status, error.get("message", "scripted error"), error.get("code"))
        self._send_json(status, body, headers)

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, chunks: Iterator[dict[str, Any]]) -> None:
        """Write Server-Sent Events; the connection close ends the body (HTTP/1.0)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True
