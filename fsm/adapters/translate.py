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
from typing import Any

from fsm.adapters.textcalls import find_calls
from fsm.policy import Action, Usage, View
from fsm.records import text_json

#: Names the chat-completions API accepts for functions.
VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
EMPTY_REPLY = "(empty reply)"
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


def system_message(view: View) -> dict[str, Any]:
    """The workflow's system prompt plus the current state and its instructions."""
    parts = [view.system_prompt] if view.system_prompt else []
    parts.append(f"Workflow {view.workflow!r} is in state {view.state!r}.")
    if view.instructions:
        parts.append(view.instructions)
    if view.final_allowed:
        parts.append("Reply with exactly one tool call.")
    else:  # small models need telling: they answer in text otherwise
        parts.append("Reply with exactly one tool call; a text answer is not accepted in "
                     "this state.")
    return {"role": "system", "content": "\n\n".join(parts)}


def chat_messages(view: View) -> list[dict[str, Any]]:
    """The view's transcript as chat messages, system message first."""
    out = [system_message(view)]
    index = 0  # the message's index in the full (uncompacted) transcript
    pending: str | None = None  # a call id still waiting for its result
    for msg in view.messages:
        role = msg.get("role")
        if role == "tool":
            out.append(_tool_message(msg, pending))
            pending = None
        else:
            if pending is not None:
                out.append({"role": "tool", "tool_call_id": pending, "content": NO_RESULT})
                pending = None
            if role == "assistant":
                chat = _assistant_message(msg, index)
                pending = call_id(index) if "tool_calls" in chat else None
            else:
                chat = {"role": "user", "content": _text(msg.get("content", ""))}
            out.append(chat)
        summary_of = msg.get("summary_of")
        index = int(summary_of[1]) if summary_of else index + 1
    if pending is not None:
        out.append({"role": "tool", "tool_call_id": pending, "content": NO_RESULT})
    return out


def _text(content: Any) -> str:
    return content if isinstance(content, str) else dumps(content)


def _assistant_message(msg: Mapping[str, Any], index: int) -> dict[str, Any]:
    if "final" in msg:
        return {"role": "assistant", "content": _text(msg["final"]) or EMPTY_REPLY}
    tool = msg.get("tool")
    if tool is None:
        return {"role": "assistant", "content": _text(msg.get("content") or "") or EMPTY_REPLY}
    call = {"id": call_id(index), "type": "function",
            "function": {"name": str(tool), "arguments": dumps(msg.get("args") or {})}}
    return {"role": "assistant", "content": msg.get("text") or None, "tool_calls": [call]}


def _tool_message(msg: Mapping[str, Any], pending: str | None) -> dict[str, Any]:
    if "error" in msg:
        content = f"error: {msg['error']}"
    else:
        content = dumps(msg.get("result"))
    if pending is None:  # a result whose call is not in the view: say whose it is
        return {"role": "user", "content": f"result of {msg.get('tool')}: {content}"}
    return {"role": "tool", "tool_call_id": pending, "content": content}


def tools_param(view: View) -> list[dict[str, Any]]:
    """The view's tool schemas in the chat-completions ``tools`` shape."""
    return [{"type": "function", "function": dict(schema)} for schema in view.tools]


def forced_choice(view: View, kind: str | None = None) -> Any:
    """The ``tool_choice`` that asks for a tool call in ``view``, or ``None``.

    ``None`` when the state accepts a final answer or offers no tools. Otherwise the
    one offered function by name, or ``"required"`` when several are offered (or
    ``kind`` is ``"required"``).
    """
    if view.final_allowed or not view.tools:
        return None
    kind = kind or choice_kind(view)
    if kind == "function":
        return {"type": "function", "function": {"name": view.tools[0]["name"]}}
    return "required"


def choice_kind(view: View) -> str:
    """``"function"`` when one tool is offered, else ``"required"``."""
    return "function" if len(view.tools) == 1 else "required"


def request_body(view: View, model: str, options: Mapping[str, Any] | None = None, *,
                 force: str | None = "auto") -> dict:
    """The chat-completions request for ``view``.

    ``options`` adds request fields (``temperature``, ``seed``, ``tool_choice``...);
    ``parallel_tool_calls`` defaults to ``False`` and is left out when set to ``None``.
    In a state that accepts no final answer the request asks for a tool call
    (:func:`forced_choice`) unless ``options`` sets ``tool_choice`` (``None`` leaves it
    out); ``force`` picks the kind: ``"auto"`` (by the number of tools),
    ``"function"``, ``"required"``, or ``None`` for none.
    """
    opts: dict[str, Any] = {"parallel_tool_calls": False}
    choice = None if force is None else forced_choice(view, None if force == "auto" else force)
    if choice is not None:
        opts = {"tool_choice": choice, **opts}
    opts.update(options or {})
    body: dict[str, Any] = {"model": model, "messages": chat_messages(view)}
    tools = tools_param(view)
    if tools:
        body["tools"] = tools
    for key, value in opts.items():
        if value is None or (not tools and key in ("parallel_tool_calls", "tool_choice")):
            continue
        body[key] = value
    return body


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
