"""A fake OpenAI-compatible chat-completions server: real HTTP on 127.0.0.1, scripted.

    with FakeOpenAI() as server:
        server.script(call("get_order", {"order_id": "A-1001"}), error(429), ...)
        policy = OpenAIPolicy(spec, "gpt-4o-mini", base_url=server.base_url, api_key="k")

Each request pops the next scripted reply; with the script empty, ``responder(body)``
answers if set, else the server replies 500 "script exhausted". Every request is
recorded with its raw body bytes and headers.

``mimic_llama_cpp()`` makes it behave like llama-cpp-python's server: a request with
``tool_choice: "required"`` gets a 500, one that forces a named function has its
connection dropped without a reply (the server crashed); neither uses up the script.
``text_call(form, name, args)`` writes a call into the reply text the way small
models do when the server has no parser for them (``FORMS``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to wait before answering (to provoke client timeouts).
    delay: float = 0.0
    #: Close the connection without any reply, as a server that crashed would.
    drop: bool = False

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body).encode()


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.raw)

    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools", [])]

    def events(self) -> list[str]:
        for t in self.body.get("tools", []):
            if t["function"]["name"] == "advance":
                return list(t["function"]["parameters"]["properties"]["event"]["enum"])
        return []


def completion(message: dict[str, Any], *, usage: tuple[int, int] | None = (100, 20),
               finish_reason: str = "stop", choices: list[Any] | None = None) -> Reply:
    """A 200 chat-completion with ``message`` as its only choice."""
    body: dict[str, Any] = {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": choices if choices is not None else [
            {"index": 0, "message": {"role": "assistant", **message},
             "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                         "total_tokens": usage[0] + usage[1]}
    return Reply(body=body)


def tool_call(name: str, args: Any, index: int = 0) -> dict[str, Any]:
    raw = args if isinstance(args, str) else json.dumps(args)
    return {"id": f"srv_{index}", "type": "function",
            "function": {"name": name, "arguments": raw}}


def call(name: str, args: Any = None, *, usage: tuple[int, int] | None = (100, 20),
         content: str | None = None) -> Reply:
    """A reply with one tool call; ``args`` may be a raw (even malformed) string."""
    return completion({"content": content, "tool_calls": [tool_call(name, args or {})]},
                      usage=usage, finish_reason="tool_calls")


def calls(*pairs: tuple[str, Any], usage: tuple[int, int] = (100, 20)) -> Reply:
    """A reply with several (parallel) tool calls."""
    return completion({"content": None,
                       "tool_calls": [tool_call(n, a, i) for i, (n, a) in enumerate(pairs)]},
                      usage=usage, finish_reason="tool_calls")


def text(content: str | None, *, usage: tuple[int, int] = (100, 20), **extra: Any) -> Reply:
    return completion({"content": content, **extra}, usage=usage)


#: The ways a model writes a tool call into its reply text.
FORMS = ("hermes", "hermes-unclosed", "fenced", "python_tag", "llama_json", "function_tag",
         "pythonic", "mistral", "openai_json")


def written_call(form: str, name: str, args: dict[str, Any]) -> str:
    """The reply text of a model that writes a call to ``name`` in ``form``."""
    hermes = json.dumps({"name": name, "arguments": args})
    llama = json.dumps({"name": name, "parameters": args})
    kwargs = ", ".join(f"{k}={v!r}" for k, v in args.items())
    texts = {
        "hermes": f"I will look that up.\n<tool_call>\n{hermes}\n</tool_call>",
        "hermes-unclosed": f"<tool_call>\n{hermes}\n",
        "fenced": f"Calling the tool:\n```json\n{hermes}\n```",
        "python_tag": f"<|python_tag|>{llama}<|eom_id|>",
        "llama_json": llama,
        "function_tag": f"<function={name}>{json.dumps(args)}</function>",
        "pythonic": f"[{name}({kwargs})]",
        "mistral": f"[TOOL_CALLS][{hermes}]",
        "openai_json": json.dumps({"type": "function",
                                   "function": {"name": name, "arguments": json.dumps(args)}}),
    }
    return texts[form]


def text_call(form: str, name: str, args: dict[str, Any] | None = None, *,
              usage: tuple[int, int] | None = (100, 20)) -> Reply:
    """A reply whose only content is a call written as text (no ``tool_calls``)."""
    return completion({"content": written_call(form, name, args or {})}, usage=usage)


def drop() -> Reply:
    """No reply at all: the connection is closed (a crashed server)."""
    return Reply(drop=True)


def error(status: int, message: str = "fake failure", headers: dict[str, str] | None = None,
          delay: float = 0.0) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "server_error"}},
                 headers=headers or {}, delay=delay)


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self._script: deque[Reply] = deque()
        #: Answer ``tool_choice: "required"`` with a 500 (llama-cpp-python).
        self.reject_required = False
        #: Drop the connection of a request forcing a named function (llama-cpp-python).
        self.drop_forced_function = False
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def chat(self) -> list[Recorded]:
        """The chat-completions requests, in order."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def mimic_llama_cpp(self) -> FakeOpenAI:
        """Fail on a forced tool_choice the way llama-cpp-python's server does."""
        self.reject_required = self.drop_forced_function = True
        return self

    def _next(self, body: dict[str, Any]) -> Reply:
        choice = body.get("tool_choice")
        if choice == "required" and self.reject_required:
            return error(500, "Internal Server Error: tool_choice 'required' is not supported")
        if isinstance(choice, dict) and self.drop_forced_function:
            return drop()
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return error(500, "fake server: script exhausted")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms stall

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with fake._lock:
                    fake.requests.append(Recorded(self.path, dict(self.headers), raw))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                reply = fake._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = reply.encoded()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
