"""A fake OpenAI-compatible chat-completions server: real HTTP on 127.0.0.1, scripted.

    with FakeOpenAI() as server:
        server.script(call("get_order", {"order_id": "A-1001"}), error(429), ...)
        policy = OpenAIPolicy(spec, "gpt-4o-mini", base_url=server.base_url, api_key="k")

Each request pops the next scripted reply; with the script empty, ``responder(body)``
answers if set, else the server replies 500 "script exhausted". Every request is
recorded with its raw body bytes and headers.

``FakeOpenAI(family="llama-cpp-python")`` (or ``"openai"``, ``"vllm"``, ``"llama.cpp"``,
``"ollama"``; see :mod:`fake_families`) validates each request the way that server does
and answers ``GET /models`` as it does; a refused request does not use up the script. A
request that would crash the real server (llama-cpp-python on a schema with a
``pattern``) has its connection dropped, and the server stays down (connections are
refused) until :meth:`FakeOpenAI.restart`. ``hide_models=True`` answers ``GET /models``
with a 404, as a proxy in front of the server might. Without a family the fake answers
``GET /models`` with a 404 too.

``mimic_llama_cpp()`` is the older, coarser model: a request with ``tool_choice:
"required"`` gets a 500, one that forces a named function has its connection dropped.
``text_call(form, name, args)`` writes a call into the reply text the way small models
do when the server has no parser for them (``FORMS``).
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

from fake_families import OWNERS, Family


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
    #: ... and stop listening until :meth:`FakeOpenAI.restart`.
    crash: bool = False

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
         "pythonic", "mistral", "openai_json", "functions", "functions-escaped", "tool_code",
         "tool_code-print")


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
        # llama-cpp-python's chatml-function-calling prompt shows calls this way, and
        # its template escapes the JSON in it for HTML, which small models copy.
        "functions": f"functions.{name}:\n{json.dumps(args)}",
        "functions-escaped": f"message:\nfunctions.{name}:\n"
                             f"{json.dumps(args).replace(chr(34), '&#34;')}",
        "tool_code": f"```tool_code\n{name}({kwargs})\n```",
        "tool_code-print": f"```tool_code\nprint({name}({kwargs}))\n```",
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
    def __init__(self, family: str | None = None, *, hide_models: bool = False,
                 **options: Any) -> None:
        #: The server family whose validation the fake applies (``None``: none).
        self.family = Family(family, **options) if family is not None else None
        self.hide_models = hide_models
        #: How many times a request crashed the fake (see :meth:`restart`).
        self.crashes = 0
        self.down: threading.Thread | None = None
        #: Set while crashed: requests on connections still open are reset.
        self.dead = False
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
        if self.family is not None:
            verdict = self.family.check(body)
            if verdict == "crash":
                return Reply(drop=True, crash=True)
            if isinstance(verdict, tuple):
                return Reply(status=verdict[0], body=verdict[1])
        choice = body.get("tool_choice")
        if choice == "required" and self.reject_required:
            return error(500, "Internal Server Error: tool_choice 'required' is not supported")
        if isinstance(choice, dict) and self.drop_forced_function:
            return drop()
        reply = self._scripted(body)
        if self.family is not None and self.family.crashes_on_reply(body, reply.body):
            return Reply(drop=True, crash=True)
        return reply

    def _scripted(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return error(500, "fake server: script exhausted")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"fake": self})

    def _models(self, path: str) -> tuple[int, Any]:
        if self.family is None or self.hide_models or not path.endswith("/models"):
            return 404, {"error": {"message": "not found", "type": "not_found"}}
        return 200, {"object": "list", "data": [
            {"id": "fake-model", "object": "model", "owned_by": OWNERS[self.family.name]}]}

    def _go_down(self) -> None:
        """Stop listening, as a crashed server does (in another thread: the handler's
        own thread cannot wait for the server to shut down)."""
        self.crashes += 1
        self.dead = True
        server = self._server
        try:
            server.socket.shutdown(socket.SHUT_RDWR)  # new connections are refused now
        except OSError:
            pass
        self.down = threading.Thread(target=lambda: (server.shutdown(), server.server_close()),
                                     daemon=True)
        self.down.start()

    def restart(self) -> None:
        """Listen again on the same port after a crash."""
        if self.down is not None:
            self.down.join(timeout=5)
        self._thread.join(timeout=5)
        port = int(self.base_url.split(":")[2].split("/")[0])
        self.dead = False
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self.crashes and not self._thread.is_alive():
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms stall

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.fake.dead:  # a kept-alive connection of a crashed server: reset
            self._hang_up()
            return
        with self.fake._lock:
            self.fake.requests.append(Recorded(self.path, dict(self.headers), raw))
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        reply = self.fake._next(body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.drop:
            if reply.crash:  # stop listening first: a retry finds nobody there
                self.fake._go_down()
            self._hang_up()
            return
        self._answer(reply)

    def _hang_up(self) -> None:
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, reply: Reply) -> None:
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

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        status, body = self.fake._models(self.path)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass
