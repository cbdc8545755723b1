"""The transcript ↔ OpenAI chat-completions messages.

Everything here is a pure function of the :class:`~fsm.policy.View`, so the request
a model received at step N can be rebuilt later from the stored run
(``request_body(view_at(spec, store, run_id, N), model)``) and compared byte for
byte with what was sent (``encode(...)``).

Tool calls and their results are linked by ids derived from the message's index in
the full transcript (``call_<index>``), so an id never changes between steps, not
even when older turns are compacted away.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fsm.adapters import servers
from fsm.adapters.textcalls import find_calls
from fsm.policy import Action, Usage, View
from fsm.records import text_json
from fsm.records.transcript import FinalAnswer, Message, Summary, ToolCall, ToolError, ToolResult

#: Names the chat-completions API accepts for functions.
VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
NO_RESULT = "(no result was recorded for this call)"
_EXCERPT = 300


def call_id(index: int) -> str:
    """The stable id of the tool call at transcript index ``index``."""
    return f"call_{index}"


#: JSON for text the model reads: sorted keys, so a reloaded transcript reads the same.
dumps = text_json


def encode(body: Mapping[str, Any]) -> bytes:
    """The exact bytes sent for ``body``."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def system_message(view: View, *, list_tools: bool = False) -> dict[str, Any]:
    """The workflow's system prompt plus the current state and its instructions
    (``list_tools``: and the tools, for a request whose prompt shows none)."""
    parts = [view.system_prompt] if view.system_prompt else []
    parts.append(f"Workflow {view.workflow!r} is in state {view.state!r}.")
    if view.instructions:
        parts.append(view.instructions)
    if list_tools:
        parts.append(tool_listing(view))
    if view.asks_customer:
        parts.append("Reply with exactly one tool call, or write to the customer in plain "
                     "text (no tool call): the customer reads it and their answer comes back "
                     "as the next user message.")
    elif view.final_allowed:
        parts.append("Reply with exactly one tool call.")
    else:  # small models need telling: they answer in text otherwise
        parts.append("Reply with exactly one tool call; a text answer is not accepted in "
                     "this state.")
    return {"role": "system", "content": "\n\n".join(parts)}


def tool_listing(view: View) -> str:
    """The offered tools as text, and how to call one, for a prompt that shows no tools."""
    lines = ['Call one tool, as one JSON object {"name": TOOL, "arguments": {...}}. Tools:']
    for schema in view.tools:
        props = (schema.get("parameters") or {}).get("properties") or {}
        args = ", ".join(f"{k}: {_argument(v)}" for k, v in props.items()) or "none"
        lines.append(f"- {schema['name']}: {schema.get('description', '')} Arguments: {args}")
    return "\n".join(lines)


def _argument(schema: Mapping[str, Any]) -> str:
    if isinstance(schema.get("enum"), list):
        return " | ".join(str(v) for v in schema["enum"])
    return f"{schema.get('type', 'any')} ({schema.get('description', '')})"


def chat_messages(view: View, *, results_as: str = "tool",
                  list_tools: bool = False) -> list[dict[str, Any]]:
    """The view's transcript as chat messages, system message first.

    ``results_as="user"`` sends tool results as user messages, for chat templates that
    show no ``tool`` message to the model (llama-cpp-python's). An assistant reply that
    had neither text nor a call is left out: the observation after it says what was
    wrong, and no placeholder words are put in the model's mouth.
    """
    out = [system_message(view, list_tools=list_tools)]
    index = 0  # the message's index in the full (uncompacted) transcript
    pending: str | None = None  # a call id still waiting for its result
    for msg in view.transcript:
        if isinstance(msg, ToolResult | ToolError):
            out.append(_tool_message(msg, None if results_as == "user" else pending))
            pending = None
        else:
            if pending is not None:
                out.append(_no_result(pending, results_as))
                pending = None
            chat = _assistant_message(msg, index) if msg.role == "assistant" else \
                {"role": "user", "content": _text(getattr(msg, "content", None) or
                                                  (msg.model_extra or {}).get("content", ""))}
            if chat is not None:
                pending = call_id(index) if "tool_calls" in chat else None
                out.append(chat)
        index = msg.summary_of[1] if isinstance(msg, Summary) else index + 1
    if pending is not None:
        out.append(_no_result(pending, results_as))
    return out


def _text(content: Any) -> str:
    return content if isinstance(content, str) else dumps(content)


def _assistant_message(msg: Message, index: int) -> dict[str, Any] | None:
    if isinstance(msg, FinalAnswer):
        text = _text(msg.final)
        return {"role": "assistant", "content": text} if text else None
    if not isinstance(msg, ToolCall):
        text = _text(getattr(msg, "content", None) or "")
        return {"role": "assistant", "content": text} if text else None
    call = {"id": call_id(index), "type": "function",
            "function": {"name": msg.tool, "arguments": dumps(msg.args or {})}}
    # A string, never null or missing: llama-cpp-python answers 500 to both, and every
    # other server takes "" beside tool_calls.
    return {"role": "assistant", "content": msg.text or "", "tool_calls": [call]}


def _no_result(pending: str, results_as: str) -> dict[str, Any]:
    if results_as == "user":
        return {"role": "user", "content": NO_RESULT}
    return {"role": "tool", "tool_call_id": pending, "content": NO_RESULT}


def _tool_message(msg: ToolResult | ToolError, pending: str | None) -> dict[str, Any]:
    content = f"error: {msg.error}" if isinstance(msg, ToolError) else dumps(msg.result)
    if pending is None:  # a result whose call is not in the view: say whose it is
        return {"role": "user", "content": f"result of {msg.tool}: {content}"}
    return {"role": "tool", "tool_call_id": pending, "content": content}


def tools_param(view: View, *, grammar_safe: bool = False) -> list[dict[str, Any]]:
    """The view's tool schemas in the chat-completions ``tools`` shape (``grammar_safe``:
    without what a grammar converter cannot take, see :func:`servers.grammar_safe`)."""
    return [{"type": "function",
             "function": servers.grammar_safe(dict(schema)) if grammar_safe else dict(schema)}
            for schema in view.tools]


def forced_choice(view: View, kind: str | None = None) -> Any:
    """The ``tool_choice`` that asks for a tool call in ``view``, or ``None``.

    ``None`` when the state accepts a final answer or offers no tools. Otherwise the
    one offered function by name, or ``"required"`` when several are offered (or
    ``kind`` is ``"required"``).
    """
    if view.final_allowed or view.asks_customer or not view.tools:
        return None
    kind = kind or choice_kind(view)
    if kind == "function":
        return {"type": "function", "function": {"name": view.tools[0]["name"]}}
    return "required"


def choice_kind(view: View) -> str:
    """``"function"`` when one tool is offered, else ``"required"``."""
    return "function" if len(view.tools) == 1 else "required"


def choice_value(view: View, choice: str) -> Any:
    """The ``tool_choice`` field for ``choice`` (one of :data:`servers.CHOICES`), or
    ``None`` to leave it out."""
    if choice == "omit":
        return None
    if choice == "grammar":
        return "none"
    if choice == "function":
        return {"type": "function", "function": {"name": view.tools[0]["name"]}}
    return choice


@dataclass(frozen=True)
class Shape:
    """Everything besides the view that decides a request's bytes. Each step's policy
    event records it (:meth:`record`), so ``fsm show --request`` rebuilds exactly what
    was sent, fallbacks included."""

    model: str
    #: The ``tool_choice`` sent (one of :data:`servers.CHOICES`).
    choice: str = "omit"
    #: The server family the request was shaped for (:data:`servers.FAMILIES`).
    server: str = "generic"
    #: The output cap, in tokens (``None``: none sent).
    max_output_tokens: int | None = None
    #: llama-server's generation time limit, in milliseconds.
    time_limit_ms: int | None = None
    #: Extra request fields, as given (``temperature``, ``seed``...).
    options: Mapping[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The shape as plain JSON for the log."""
        out: dict[str, Any] = {"model": self.model, "server": self.server,
                               "tool_choice": self.choice}
        if self.max_output_tokens is not None:
            out["max_output_tokens"] = self.max_output_tokens
        if self.time_limit_ms is not None:
            out["time_limit_ms"] = self.time_limit_ms
        if self.options:
            out["options"] = json.loads(encode(dict(self.options)))
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Shape:
        """The shape a policy event's ``request`` records."""
        return cls(model=str(record.get("model") or ""),
                   choice=str(record.get("tool_choice") or "omit"),
                   server=str(record.get("server") or "generic"),
                   max_output_tokens=record.get("max_output_tokens"),
                   time_limit_ms=record.get("time_limit_ms"),
                   options=dict(record.get("options") or {}))


def body_for(view: View, shape: Shape) -> dict[str, Any]:
    """The chat-completions request for ``view``, shaped by ``shape``.

    ``parallel_tool_calls`` is ``False`` unless the options say otherwise (``None``
    leaves it out); an option set to ``None`` is left out; a cap given in the options
    (``max_tokens``, ``max_completion_tokens``) replaces the shape's.
    """
    family = servers.FAMILIES.get(shape.server, servers.FAMILIES["generic"])
    grammar = shape.choice == "grammar" and bool(view.tools)
    body: dict[str, Any] = {"model": shape.model, "messages": chat_messages(
        view, results_as=family.results_as, list_tools=grammar)}
    tools = tools_param(view, grammar_safe=family.grammar_safe)
    opts: dict[str, Any] = {}
    if tools:
        body["tools"] = tools
        opts["tool_choice"] = choice_value(view, shape.choice)
        opts["parallel_tool_calls"] = False
    if grammar:
        opts["grammar"] = servers.call_grammar(view.tool_names())
    options = dict(shape.options)
    if shape.max_output_tokens is not None and not _CAPS & options.keys():
        opts[family.cap_field] = shape.max_output_tokens
    if family.time_limit and shape.time_limit_ms is not None:
        opts["t_max_predict_ms"] = shape.time_limit_ms
    opts.update(options)
    for key, value in opts.items():
        if value is None or (not tools and key in ("parallel_tool_calls", "tool_choice")):
            continue
        body[key] = value
    return body


_CAPS = frozenset({"max_tokens", "max_completion_tokens"})


def request_body(view: View, model: str, options: Mapping[str, Any] | None = None, *,
                 force: str | None = "auto") -> dict:
    """The chat-completions request for ``view`` to a server of no known family.

    ``options`` adds request fields (``temperature``, ``seed``, ``tool_choice``...). In a
    state that accepts no final answer the request asks for a tool call
    (:func:`forced_choice`) unless ``options`` sets ``tool_choice`` (``None`` leaves it
    out); ``force`` picks the kind: ``"auto"`` (by the number of tools),
    ``"function"``, ``"required"``, or ``None`` for none.
    """
    choice = "omit"
    if force is not None and forced_choice(view) is not None:
        choice = choice_kind(view) if force == "auto" else force
    return body_for(view, Shape(model=model, choice=choice, options=dict(options or {})))


# -- replies ----------------------------------------------------------------------------

def action_from_response(response: Mapping[str, Any], view: View, usage: Usage) -> Action:
    """The action in a chat-completions response; unusable output becomes a problem."""
    choices = response.get("choices") or []
    if not choices or not isinstance(choices[0], Mapping):
        return Action(problem=_empty(view, "the reply had no choices"), usage=usage)
    choice = choices[0]
    message = choice.get("message") or {}
    content = _text(message.get("content") or "").strip()
    if message.get("refusal"):
        return Action(problem=f"the model refused: {message['refusal']}. "
                      f"{_offer(view)}", usage=usage, text=content or None)
    calls = list(message.get("tool_calls") or [])
    if not calls and isinstance(message.get("function_call"), Mapping):
        calls = [{"function": message["function_call"]}]  # the older single-call shape
    if calls:
        return _from_calls(calls, content, view, usage)
    if choice.get("finish_reason") == "length":
        found = find_calls(content, view.tool_names()) if content else None
        if found is None or not found.calls:
            return Action(problem=f"the reply was cut off at the output cap before it was "
                          f"complete ({len(content)} characters). Reply with one short "
                          f"tool call, without explanations. {_offer(view)}", usage=usage)
    if choice.get("finish_reason") == "content_filter":
        return Action(problem=f"the reply was withheld by a content filter. {_offer(view)}",
                      usage=usage)
    if content:
        return _from_text(content, view, usage)
    return Action(problem=_empty(view, "the reply was empty"), usage=usage)


def _from_text(content: str, view: View, usage: Usage) -> Action:
    """A text reply: the tool calls written in it (see :mod:`.textcalls`), else a final
    answer."""
    found = find_calls(content, view.tool_names())
    if found is None:
        return Action(final=content, usage=usage)
    if found.problem is not None:
        return Action(problem=f"{found.problem}. {_offer(view)}", usage=usage,
                      text=found.text or None)
    return _from_calls(found.calls, found.text, view, usage)


def _offer(view: View) -> str:
    names = ", ".join(view.tool_names()) or "none"
    return f"Call exactly one of the offered tools ({names})."


def _empty(view: View, what: str) -> str:
    return f"{what}: no tool call and no text. {_offer(view)}"


def _from_calls(calls: list[Any], content: str, view: View, usage: Usage) -> Action:
    first = calls[0] if isinstance(calls[0], Mapping) else {}
    fn = first.get("function") or {}
    name = str(fn.get("name") or "")
    text = content or None
    if len(calls) > 1:
        ignored = ", ".join(_call_name(c) for c in calls[1:])
        note = (f"[runtime] Only one tool call runs per step: {name or '?'} was taken; "
                f"ignored: {ignored}. Make them again, one per reply, if still needed.")
        text = f"{content}\n\n{note}" if content else note
    tool = name if VALID_NAME.match(name) else None
    if name not in view.tool_names():
        shown = repr(name[:64]) if name else "without a name"
        problem = (f"tool {shown} is not offered in state {view.state!r} "
                   f"(offered: {', '.join(view.tool_names()) or 'none'})")
        args, _ = parse_arguments(fn.get("arguments"))
        return Action(problem=problem, tool=tool, args=args if tool else {}, text=text,
                      usage=usage)
    args, error = parse_arguments(fn.get("arguments"))
    if error is not None:
        return Action(problem=f"arguments of {name!r} {error}", tool=name, text=text,
                      usage=usage)
    return Action(tool=name, args=args, text=text, usage=usage)


def _call_name(call: Any) -> str:
    fn = call.get("function") if isinstance(call, Mapping) else None
    return str((fn or {}).get("name") or "?")


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """(arguments, None), or ({}, what was wrong) for arguments that are not a JSON object."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if not isinstance(raw, str):
        return {}, f"must be a JSON object, got {type(raw).__name__}"
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {}, (f"are not valid JSON ({exc}): {raw[:_EXCERPT]!r}; "
                    "send the arguments as one JSON object")
    if not isinstance(value, dict):
        return {}, f"must be a JSON object, got {type(value).__name__}: {raw[:_EXCERPT]!r}"
    return value, None
