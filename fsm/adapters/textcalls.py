"""Tool calls that a server left in the reply's text, as small and local models write them.

A server without a tool-call parser for its model (llama-cpp-python's, many Ollama
models, vLLM without ``--tool-call-parser``) returns the model's call as plain
``content``. :func:`find_calls` recognises these forms:

- Hermes / Qwen: ``<tool_call>{"name": "get_order", "arguments": {...}}</tool_call>``
  (several blocks, or a last one left unclosed by the stop token);
- Llama 3.1: ``<|python_tag|>{"name": "get_order", "parameters": {...}}<|eom_id|>``,
  also with several calls separated by ``;`` or in the pythonic form;
- Llama 3 JSON: ``{"name": "get_order", "parameters": {...}}``, alone or inside text;
- Llama 3.1 custom functions: ``<function=get_order>{"order_id": "A-1001"}</function>``;
- Llama 3.2 / 4 pythonic: ``[get_order(order_id="A-1001")]`` (offered tools only);
- Mistral: ``[TOOL_CALLS][{"name": "get_order", "arguments": {...}}]``;
- a fenced block: ````json {"name": ..., "arguments": {...}} ```` (also the OpenAI
  ``{"function": {"name": ..., "arguments": ...}}`` shape, and a Python dict);
- Gemma: ````tool_code get_order(order_id="A-1001") ```` (also wrapped in ``print(...)``);
- llama-cpp-python's ``chatml-function-calling``: ``functions.get_order:\n{"order_id":
  "A-1001"}`` (one or more, as its prompt shows the model; an answer may start with
  ``message:``);
- any of these HTML-escaped (``{&#34;order_id&#34;: ...}``): that template escapes the
  JSON it shows the model, and small models copy it.

A JSON object counts as a call only with that shape (a name plus ``arguments`` or
``parameters``, and nothing else), so a final answer that merely contains JSON stays
text. A marked call (``<tool_call>``, ``<|python_tag|>``, ``[TOOL_CALLS]``) that cannot
be read becomes a problem the model is told about.
"""

from __future__ import annotations

import ast
import html
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Replies longer than this are not searched for calls written as text.
MAX_SCAN_CHARS = 100_000
#: How many ``{`` positions of an unmarked reply are tried as the start of a call.
MAX_OBJECTS = 64
_SHAPE = "one JSON object {\"name\": TOOL, \"arguments\": {...}}"
_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_PYTHON_TAG = "<|python_tag|>"
_MISTRAL = "[TOOL_CALLS]"
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|tool_code|tool_call|python|py)?[ \t]*\n?(.*?)```",
                    re.DOTALL)
#: ``functions.NAME:`` as llama-cpp-python's chatml-function-calling prompt writes calls.
_FUNCTIONS = re.compile(r"(?:^|\n)[ \t]*(?:message:\s*)?functions\.([A-Za-z0-9_-]{1,64}):[ \t]*\n?")
#: HTML character references a template's autoescaping leaves in JSON.
_ESCAPED = re.compile(r"&(?:#34|#39|quot|apos|amp|lt|gt|#x22|#x27);")
_SPECIAL = re.compile(r"<\|(?:eom_id|eot_id|im_end|end|endoftext)\|>|</?s>")
_PYTHONIC = re.compile(r"^\[?\s*[A-Za-z_][\w.]*\(.*\)\s*\]?$", re.DOTALL)
_ARG_KEYS = ("arguments", "parameters", "args")
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})


@dataclass(frozen=True)
class TextCalls:
    """Calls found in a reply's text."""

    #: In the chat-completions shape: ``{"function": {"name": ..., "arguments": ...}}``.
    calls: list[dict[str, Any]] = field(default_factory=list)
    #: The reply's text with the calls (and the template's special tokens) taken out.
    text: str = ""
    #: Set when the text marks a call that could not be read.
    problem: str | None = None


def find_calls(content: str, tool_names: Sequence[str] = ()) -> TextCalls | None:
    """The tool calls written in ``content``, or ``None`` when it holds none."""
    if not content or len(content) > MAX_SCAN_CHARS:
        return None
    found = _find(content, tool_names)
    if (found is None or found.problem is not None) and _ESCAPED.search(content):
        unescaped = _find(html.unescape(content), tool_names)
        if unescaped is not None and unescaped.calls:
            return unescaped
    return found


def _find(content: str, tool_names: Sequence[str]) -> TextCalls | None:
    finders: list[Callable[[str, Sequence[str]], TextCalls | None]] = [
        _hermes, _mistral, _function_tags, _python_tag, _functions_prefix, _fenced,
        _bare_json, _bare_pythonic]
    for finder in finders:
        found = finder(content, tool_names)
        if found is not None:
            return found
    return None


# -- the forms -------------------------------------------------------------------------

def _hermes(content: str, names: Sequence[str]) -> TextCalls | None:
    blocks = list(_HERMES.finditer(content))
    if not blocks:
        return None
    calls = []
    for block in blocks:
        value = _loads(_unfence(block.group(1)))
        items = value if isinstance(value, list) else [value]
        shaped = [_as_call(v, names, marked=True) for v in items]
        if not items or any(c is None for c in shaped):
            return _problem(content, f"a <tool_call> block is not {_SHAPE}: "
                                     f"{_excerpt(block.group(1))}")
        calls += [c for c in shaped if c is not None]
    return TextCalls(calls, _rest(_HERMES.sub("", content)))


def _mistral(content: str, names: Sequence[str]) -> TextCalls | None:
    at = content.find(_MISTRAL)
    if at < 0:
        return None
    tail = content[at + len(_MISTRAL):]
    value, end = _decode(tail.lstrip())
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(v, names, marked=True) for v in items]
    if value is None or not items or any(c is None for c in calls):
        return _problem(content, f"the [TOOL_CALLS] part is not a list of {_SHAPE}: "
                                 f"{_excerpt(tail)}")
    rest = content[:at] + tail.lstrip()[end:]
    return TextCalls([c for c in calls if c is not None], _rest(rest))


def _function_tags(content: str, names: Sequence[str]) -> TextCalls | None:
    tags = list(_FUNCTION_TAG.finditer(content))
    if not tags:
        return None
    calls = [{"function": {"name": t.group(1), "arguments": t.group(2).strip() or "{}"}}
             for t in tags]
    return TextCalls(calls, _rest(_FUNCTION_TAG.sub("", content)))


def _python_tag(content: str, names: Sequence[str]) -> TextCalls | None:
    at = content.find(_PYTHON_TAG)
    if at < 0:
        return None
    body = _SPECIAL.sub("", content[at + len(_PYTHON_TAG):]).strip()
    calls = _json_calls(body, names) or _pythonic(body, names, known_only=False)
    if not calls:
        return _problem(content, f"the call after <|python_tag|> is not {_SHAPE} nor "
                                 f"name(arg=value): {_excerpt(body)}")
    return TextCalls(calls, _rest(content[:at]))


def _functions_prefix(content: str, names: Sequence[str]) -> TextCalls | None:
    """``functions.NAME:`` followed by the arguments as one JSON object, once or more."""
    marks = list(_FUNCTIONS.finditer(content))
    if not marks:
        return None
    calls, rest, pos = [], [], 0
    for mark in marks:
        if mark.start() < pos:
            continue
        value, end = _decode(content, _skip_space(content, mark.end()))
        if not isinstance(value, dict):
            return _problem(content, f"functions.{mark.group(1)}: is not followed by its "
                                     f"arguments as one JSON object: "
                                     f"{_excerpt(content[mark.end():])}")
        calls.append({"function": {"name": mark.group(1), "arguments": value}})
        rest.append(content[pos:mark.start()])
        pos = end
    rest.append(content[pos:])
    return TextCalls(calls, _rest(re.sub(r"^\s*message:\s*", "", "".join(rest))))


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _fenced(content: str, names: Sequence[str]) -> TextCalls | None:
    calls: list[dict[str, Any]] = []
    spans = []
    for fence in _FENCE.finditer(content):
        inside = fence.group(1).strip()
        found = _json_calls(inside, names) or _literal_calls(inside, names) or _pythonic(
            inside, names, known_only=True)
        if found:
            calls += found
            spans.append(fence.span())
    if not calls:
        return None
    rest = content
    for start, end in reversed(spans):
        rest = rest[:start] + rest[end:]
    return TextCalls(calls, _rest(rest))


def _bare_json(content: str, names: Sequence[str]) -> TextCalls | None:
    """Call-shaped JSON objects (or a list of them) anywhere in the text."""
    calls: list[dict[str, Any]] = []
    rest: list[str] = []
    pos = tried = 0
    while tried < MAX_OBJECTS:
        start = _next_start(content, pos)
        if start < 0:
            break
        tried += 1
        value, end = _decode(content, start)
        items = value if isinstance(value, list) else [value]
        shaped = [_as_call(v, names, marked=False) for v in items] if items else [None]
        if value is not None and all(c is not None for c in shaped):
            calls += [c for c in shaped if c is not None]
            rest.append(content[pos:start])
            pos = end
        else:
            rest.append(content[pos:start + 1])
            pos = start + 1
    if not calls:
        return None
    rest.append(content[pos:])
    return TextCalls(calls, _rest("".join(rest)))


def _bare_pythonic(content: str, names: Sequence[str]) -> TextCalls | None:
    calls = _pythonic(_SPECIAL.sub("", content), names, known_only=True)
    return TextCalls(calls, "") if calls else None


# -- pieces ----------------------------------------------------------------------------

def _as_call(value: Any, names: Sequence[str], *, marked: bool) -> dict[str, Any] | None:
    """``value`` as a chat-completions call, or ``None`` if it is not shaped like one."""
    if not isinstance(value, Mapping):
        return None
    fn = value.get("function")
    if isinstance(fn, Mapping) and set(value) <= {"function", "type", "id"}:
        value = fn
    name = value.get("name")
    if not isinstance(name, str) or not name:
        return None
    keys = [k for k in _ARG_KEYS if k in value]
    if len(keys) > 1 or not set(value) <= _CALL_KEYS | set(_ARG_KEYS):
        return None
    if not keys and not (marked or name in names):
        return None
    raw = value[keys[0]] if keys else {}
    return {"function": {"name": name, "arguments": raw}}


def _json_calls(text: str, names: Sequence[str]) -> list[dict[str, Any]] | None:
    """Calls from a JSON object, a list of objects, or objects separated by ``;``."""
    value = _loads(text)
    if value is not None:
        items = value if isinstance(value, list) else [value]
    else:
        items = [_loads(part) for part in text.split(";") if part.strip()]
    calls = [_as_call(v, names, marked=True) for v in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _literal_calls(text: str, names: Sequence[str]) -> list[dict[str, Any]] | None:
    """A call written as a Python dict (``{'name': ..., 'arguments': {...}}``)."""
    if not text.startswith(("{", "[")):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(v, names, marked=True) for v in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _pythonic(text: str, names: Sequence[str], *, known_only: bool) -> list[dict] | None:
    """``[get_order(order_id="A-1001"), ...]``: keyword arguments with literal values."""
    text = text.strip()
    if not _PYTHONIC.match(text):
        return None
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    calls = []
    for item in items:
        item = _unprinted(item)
        name = _dotted(item.func) if isinstance(item, ast.Call) else None
        if name is None or not isinstance(item, ast.Call) or item.args:
            return None
        name = name.removesuffix(".call")  # Llama 3.1 built-ins: brave_search.call(...)
        if known_only and name not in names:
            return None
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in item.keywords if kw.arg}
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return None
        calls.append({"function": {"name": name, "arguments": args}})
    return calls or None


def _unprinted(node: ast.expr) -> ast.expr:
    """``print(call(...))`` as Gemma writes it in a ``tool_code`` block: the call."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print" and len(node.args) == 1 and not node.keywords):
        return node.args[0]
    return node


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


_DECODER = json.JSONDecoder()


def _decode(text: str, start: int = 0) -> tuple[Any, int]:
    """The JSON value at ``text[start:]`` and the index where it ends; (None, 0) if none."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None, 0


def _loads(text: str) -> Any:
    value, end = _decode(text.strip())
    return value if end and not text.strip()[end:].strip() else None


def _next_start(content: str, pos: int) -> int:
    starts = [i for i in (content.find("{", pos), content.find("[{", pos)) if i >= 0]
    return min(starts) if starts else -1


def _unfence(text: str) -> str:
    match = _FENCE.search(text)
    return match.group(1) if match else text


def _rest(text: str) -> str:
    return _SPECIAL.sub("", text).strip()


def _excerpt(text: str, limit: int = 200) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _problem(content: str, what: str) -> TextCalls:
    return TextCalls([], content.strip(), f"{what}; write each call as {_SHAPE}")
