"""The request validation of real OpenAI-compatible servers, for the fake server.

Each family's ``check(body)`` answers a request the way that server's own code does
before any model runs, or returns ``None`` to let the fake's script answer. What each
does, and where it comes from:

- **llama-cpp-python** (``llama_cpp/server/types.py``, ``llama_types.py``,
  ``llama_chat_format.py``, ``server/errors.py``): an assistant message's ``content`` is
  ``NotRequired[str]``; null fails the request model, whose validation error (every
  message type of the union, several kilobytes) becomes a 500 through
  ``RouteErrorHandler``. ``chatml-function-calling`` renders the messages with
  ``StrictUndefined``, so a missing ``content`` is a 500 "'dict object' has no attribute
  'content'"; its template shows ``tool`` messages as nothing at all; without
  ``tool_choice`` (or ``"none"``) it leaves the tools out of the prompt; ``"required"``
  fails ``assert tool_choice == "auto"`` (a 500 with an empty message); a named function
  or ``"auto"`` builds a grammar from the tool's schema, and a ``pattern`` or a large
  ``maxLength`` crashes the process. ``llama-2`` (the default for a GGUF without a chat
  template) reads ``message["content"]`` (a missing key is a 500 "'content'") and drops
  ``tool`` messages. A prompt of ``n_ctx`` tokens or more is a 400
  ``context_length_exceeded``. ``GET /models``: ``owned_by: "me"``.
- **llama.cpp** (``tools/server/utils.hpp`` / ``server-common.cpp``, ``common/chat.cpp``):
  ``tool_choice`` is read as a string (``json_value(body, "tool_choice",
  std::string("auto"))``): an object becomes ``"auto"``; another string is a 400
  "Invalid tool_choice". A message's ``content`` may be a string, an array or null, or
  absent when ``tool_calls`` are present; neither is a 500 "Failed to parse messages:
  Expected 'content' or 'tool_calls'". Overflow: 400 ``exceed_context_size_error``.
  ``GET /models``: ``owned_by: "llamacpp"``.
- **vllm** (``entrypoints/openai/protocol.py``, ``serving_chat.py``): with tools and no
  ``tool_choice`` the choice is ``"auto"``, which is a 400 unless the server was started
  with ``--enable-auto-tool-choice`` (``auto_tools``); ``required`` and a named function
  are served by guided decoding; ``content`` may be null. Overflow: 400 "This model's
  maximum context length is ...". ``GET /models``: ``owned_by: "vllm"``.
- **ollama** (``openai/openai.go``: ``FromChatRequest``): no ``tool_choice`` field (it is
  ignored); ``content`` of a type other than a string or an array (null, or missing) is a
  400 "invalid message content type: <nil>" unless ``tool_calls`` are present. Long
  prompts are truncated, not refused. ``GET /models``: ``owned_by: "library"``.
- **openai**: ``content`` may be null beside ``tool_calls``; an assistant message with
  neither is a 400; a ``tool`` message must answer a preceding ``tool_calls`` id (400).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The server families the fake can behave as.
FAMILIES = ("openai", "vllm", "llama.cpp", "llama-cpp-python", "ollama")
#: What each family's ``GET /models`` says owns its models.
OWNERS = {"openai": "system", "vllm": "vllm", "llama.cpp": "llamacpp",
          "llama-cpp-python": "me", "ollama": "library"}
#: The nesting depth (a maxLength) past which llama-cpp-python's grammar parser crashes.
GRAMMAR_DEPTH = 256


@dataclass
class Seen:
    """How the family read one request (what a test can assert about each value)."""

    choice: Any
    #: Whether the model's prompt showed the tools.
    tools_shown: bool
    #: Whether the reply is constrained to a call (a grammar or guided decoding).
    forced: str | None
    #: The tool results the prompt showed the model.
    results_shown: int = 0


@dataclass
class Family:
    """One family's validation; ``seen`` records how each accepted request was read."""

    name: str
    chat_format: str = "chatml-function-calling"
    n_ctx: int = 2048
    auto_tools: bool = False
    seen: list[Seen] = field(default_factory=list)

    def check(self, body: dict[str, Any]) -> tuple[int, Any] | str | None:
        """``(status, error body)``, ``"crash"``, or ``None`` (accepted)."""
        checker: Callable[[dict[str, Any]], tuple[int, Any] | str | None] = {
            "openai": self._openai, "vllm": self._vllm, "llama.cpp": self._llama_server,
            "llama-cpp-python": self._llama_cpp_python, "ollama": self._ollama}[self.name]
        return checker(body)

    # -- the families --------------------------------------------------------------------

    def _llama_cpp_python(self, body: dict[str, Any]) -> tuple[int, Any] | str | None:
        messages = body.get("messages") or []
        bad = [i for i, m in enumerate(messages)
               if m.get("role") == "assistant" and "content" in m
               and not isinstance(m["content"], str)]
        if bad:
            return 500, _error(_pydantic_union_errors(messages, bad), "internal_server_error")
        if any("content" not in m for m in messages):
            words = "'dict object' has no attribute 'content'" \
                if self.chat_format == "chatml-function-calling" else "'content'"
            return 500, _error(words, "internal_server_error")
        if _tokens(messages) >= self.n_ctx:
            return 400, _error(
                f"This model's maximum context length is {self.n_ctx} tokens. However, you "
                f"requested {_tokens(messages) + (body.get('max_tokens') or 0)} tokens "
                f"({_tokens(messages)} in the messages, {body.get('max_tokens')} in the "
                "completion). Please reduce the length of the messages or completion.",
                "invalid_request_error", code="context_length_exceeded")
        choice, tools = body.get("tool_choice"), body.get("tools") or []
        results = sum(1 for m in messages if m.get("role") in ("user",)
                      and str(m.get("content", "")).startswith("result of "))
        if self.chat_format != "chatml-function-calling":
            return self._llama2(body, choice, tools, results)
        if choice is None or choice == "none" or not tools:
            # The request's own grammar, if any, constrains the reply.
            self.seen.append(Seen(choice, False, "grammar" if body.get("grammar") else None,
                                  results))
            return None
        if isinstance(choice, dict):
            tool = _named(tools, choice)
            if tool is None:
                return 500, _error(f"Tool with name '{choice['function']['name']}' not found "
                                   "in tools", "internal_server_error")
            if _crashes_grammar(tool["function"].get("parameters")):
                return "crash"
            self.seen.append(Seen(choice, True, tool["function"]["name"], results))
            return None
        if choice != "auto":
            return 500, _error("", "internal_server_error")  # assert tool_choice == "auto"
        # The grammar of the function the model picks is built once it has picked it:
        # see crashes_on_reply.
        self.seen.append(Seen(choice, True, "auto", results))
        return None

    def crashes_on_reply(self, body: dict[str, Any], reply: Any) -> bool:
        """True when answering ``body`` with ``reply`` crashes the server: with
        ``tool_choice: "auto"``, llama-cpp-python builds the grammar of the function the
        model picked from that function's schema."""
        if self.name != "llama-cpp-python" or self.chat_format != "chatml-function-calling" \
                or body.get("tool_choice") != "auto" or not isinstance(reply, dict):
            return False
        message = (reply.get("choices") or [{}])[0].get("message") or {}
        picked = {c["function"]["name"] for c in message.get("tool_calls") or []}
        return any(_crashes_grammar(t["function"].get("parameters"))
                   for t in body.get("tools") or [] if t["function"]["name"] in picked)

    def _llama2(self, body: dict[str, Any], choice: Any, tools: list[Any],
                results: int) -> tuple[int, Any] | str | None:
        # The template shows no tools; a named function is still a grammar from its schema.
        if isinstance(choice, dict) and tools:
            tool = _named(tools, choice)
            if tool is None:
                return 500, _error(f"Tool choice '{choice['function']['name']}' not found in "
                                   "tools.", "internal_server_error")
            if _crashes_grammar(tool["function"].get("parameters")):
                return "crash"
            self.seen.append(Seen(choice, False, tool["function"]["name"], results))
            return None
        self.seen.append(Seen(choice, False, "grammar" if body.get("grammar") else None,
                              results))
        return None

    def _llama_server(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        messages = body.get("messages") or []
        for m in messages:
            if "content" not in m and "tool_calls" not in m:
                return 500, _error("Failed to parse messages: Expected 'content' or "
                                   "'tool_calls' (ref: https://github.com/ggml-org/llama.cpp/"
                                   "issues/8367 & https://github.com/ggml-org/llama.cpp/"
                                   "issues/12279)", "server_error")
            content = m.get("content")
            if content is not None and not isinstance(content, str | list):
                return 500, _error("Failed to parse messages: Invalid 'content' type",
                                   "server_error")
        choice = body.get("tool_choice", "auto")
        choice = choice if isinstance(choice, str) else "auto"  # an object: the default
        if choice not in ("auto", "none", "required"):
            return 400, _error(f"Invalid tool_choice: {choice}", "invalid_request_error")
        tokens = _tokens(messages)
        if tokens >= self.n_ctx:
            return 400, {"error": {"code": 400, "message": f"request ({tokens} tokens) exceeds "
                                   f"the available context size ({self.n_ctx} tokens), try "
                                   "increasing it", "type": "exceed_context_size_error",
                                   "n_prompt_tokens": tokens, "n_ctx": self.n_ctx}}
        tools = bool(body.get("tools"))
        self.seen.append(Seen(body.get("tool_choice"), tools and choice != "none",
                              "required" if tools and choice == "required" else None))
        return None

    def _vllm(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        tools = bool(body.get("tools"))
        choice = body.get("tool_choice", "auto" if tools else "none")
        if choice == "auto" and tools and not self.auto_tools:
            return 400, _error('"auto" tool choice requires --enable-auto-tool-choice and '
                               "--tool-call-parser to be set", "BadRequestError")
        tokens = _tokens(body.get("messages") or [])
        if tokens >= self.n_ctx:
            return 400, _error(f"This model's maximum context length is {self.n_ctx} tokens. "
                               f"However, you requested {tokens} tokens in the messages, "
                               "Please reduce the length of the messages.", "BadRequestError")
        forced = choice["function"]["name"] if isinstance(choice, dict) else \
            ("required" if choice == "required" else None)
        self.seen.append(Seen(body.get("tool_choice"), tools, forced))
        return None

    def _ollama(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        for m in body.get("messages") or []:
            if not isinstance(m.get("content"), str | list) and m.get("tool_calls") is None:
                return 400, _error(f"invalid message content type: "
                                   f"{'<nil>' if m.get('content') is None else 'other'}",
                                   "invalid_request_error")
        self.seen.append(Seen(body.get("tool_choice"), bool(body.get("tools")), None))
        return None

    def _openai(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        asked: set[str] = set()
        for i, m in enumerate(body.get("messages") or []):
            if m.get("role") == "assistant":
                if m.get("content") is None and not m.get("tool_calls"):
                    return 400, _error(f"Missing required parameter: 'messages[{i}].content'.",
                                       "invalid_request_error")
                asked = {c["id"] for c in m.get("tool_calls") or []}
            elif m.get("role") == "tool" and m.get("tool_call_id") not in asked:
                return 400, _error("Invalid parameter: messages with role 'tool' must be a "
                                   "response to a preceeding message with 'tool_calls'.",
                                   "invalid_request_error")
        choice = body.get("tool_choice")
        forced = choice["function"]["name"] if isinstance(choice, dict) else \
            ("required" if choice == "required" else None)
        self.seen.append(Seen(choice, bool(body.get("tools")), forced))
        return None


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _tokens(messages: list[Any]) -> int:
    """A rough token count: four characters a token."""
    return len(json.dumps(messages)) // 4


def _named(tools: list[Any], choice: dict[str, Any]) -> dict[str, Any] | None:
    name = choice.get("function", {}).get("name")
    return next((t for t in tools if t["function"]["name"] == name), None)


def _crashes_grammar(schema: Any) -> bool:
    """A schema llama-cpp-python's grammar converter turns into a grammar that crashes
    llama.cpp's parser: a regular expression, or a repetition nested too deep."""
    if isinstance(schema, list):
        return any(_crashes_grammar(v) for v in schema)
    if not isinstance(schema, dict):
        return False
    if isinstance(schema.get("pattern"), str):
        return True
    if isinstance(schema.get("maxLength"), int) and schema["maxLength"] > GRAMMAR_DEPTH:
        return True
    return any(_crashes_grammar(v) for v in schema.values())


def _pydantic_union_errors(messages: list[Any], bad: list[int]) -> str:
    """The shape of the validation error llama-cpp-python's server returns (pydantic
    tries every message type of the union and lists each failure)."""
    lines = []
    kinds = ("System", "User", "Assistant", "User", "Tool", "Function")
    for i in bad:
        for kind in kinds:
            lines.append(f"  {{'type': 'literal_error', 'loc': ('body', 'messages', {i}, "
                         f"'ChatCompletionRequest{kind}Message', 'role'), 'msg': \"Input "
                         f"should be '{kind.lower()}'\", 'input': 'assistant'}}")
        lines.append(f"  {{'type': 'string_type', 'loc': ('body', 'messages', {i}, "
                     "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input "
                     f"should be a valid string', 'input': None, 'messages': "
                     f"{json.dumps(messages)[:6000]}}}")
    return f"{len(lines)} validation errors:\n" + "\n".join(lines)
