"""Reading recorded conversations for ``fsm shadow``, in the shapes they are found.

Three shapes of file are read:

- a τ²-bench results file: a JSON object with ``info``, ``tasks`` and ``simulations``;
- a plain JSON list of such simulations;
- OpenAI-style chat logs: JSONL, one conversation per line, ``{"id", "messages",
  "reward"?}``.

Each conversation becomes a :class:`Recorded`: its identity, τ²-bench's reward, and its
turns flattened into :class:`Say` (the agent's text to the customer), :class:`Hear` (the
customer's text) and :class:`Act` (one tool call with its recorded result). What could not
be read makes that one conversation *unreadable*, with the reason; what was read in a
way worth knowing (assistant content that was a JSON string, a score that was text, two
calls in one turn) is kept as a note. Only a file that is not one of the three shapes at
all is refused whole (:class:`UnreadableFile`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsm.errors import UnreadableFile

__all__ = ["Act", "Hear", "Item", "Recorded", "Say", "UnreadableFile", "read_file"]


@dataclass(frozen=True)
class Say:
    """The agent's text to the customer."""

    turn: int
    text: str


@dataclass(frozen=True)
class Hear:
    """The customer's text."""

    turn: int
    text: str


@dataclass(frozen=True)
class Act:
    """One tool call of the agent and its recorded result (or error)."""

    turn: int
    tool: str
    args: dict[str, Any]
    result: Any = None
    #: The recorded error text, when the call failed.
    error: str | None = None
    #: Whether a result (or error) was recorded for the call.
    answered: bool = True
    #: Text the agent wrote in the same turn as the call (not a message to the customer).
    text: str | None = None


Item = Say | Hear | Act


@dataclass
class Recorded:
    """One recorded conversation, as read."""

    source: str
    simulation_id: str
    task_id: str | None = None
    trial: int | None = None
    #: τ²-bench's reward (``None``: missing or unreadable; a note says which).
    reward: float | None = None
    items: list[Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Why the conversation could not be read (``None``: it was).
    unreadable: str | None = None
    #: The reference actions of the score's own action checks (τ²-bench's
    #: ``action_checks``: ``action_id``, ``name``, ``arguments``), in order: what the
    #: conversation was scored against, whatever ``task_id`` says.
    checked_actions: tuple[dict[str, Any], ...] = ()


class _Bad(Exception):
    """One conversation cannot be read; the message says why."""


# -- files ------------------------------------------------------------------------------------

def read_file(path: str | Path) -> list[Recorded]:
    """Every conversation of the file at ``path`` (see the module's docstring)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableFile(f"cannot read {p}: {exc}") from None
    source = p.name
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return list(_jsonl(text, source, p))
    if isinstance(doc, dict) and isinstance(doc.get("simulations"), list):
        return [_simulation(s, source, i) for i, s in enumerate(doc["simulations"])]
    if isinstance(doc, list):
        return [_simulation(s, source, i) for i, s in enumerate(doc)]
    if isinstance(doc, dict) and "messages" in doc:
        return [_chat(doc, source, 1)]  # a JSONL file of one line
    raise UnreadableFile(f"{p} is none of the shapes fsm shadow reads: a τ²-bench results "
                         "file (info, tasks, simulations), a JSON list of simulations, or "
                         "JSONL chat logs ({\"id\", \"messages\", \"reward\"?} per line)")


def _jsonl(text: str, source: str, p: Path) -> Iterator[Recorded]:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    parsed = 0
    out = []
    for n, line in lines:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            out.append(Recorded(source, f"{source}:{n}",
                                unreadable=f"line {n} is not JSON: {exc.msg}"))
            continue
        parsed += 1
        out.append(_chat(doc, source, n))
    if not parsed:
        raise UnreadableFile(f"{p} is neither JSON nor JSONL (no line parses as JSON)")
    yield from out


# -- one conversation -------------------------------------------------------------------------

def _begun(doc: Any, source: str, where: str, what: str) -> Recorded:
    """The record of one conversation ``doc`` (its id, else ``where``, and its task), or an
    unreadable one when ``doc`` (``what``) is no object."""
    if not isinstance(doc, dict):
        return Recorded(source, where, unreadable=f"{what} is {type(doc).__name__}, not an "
                        "object")
    return Recorded(source, _text_id(doc.get("id"), where),
                    task_id=None if doc.get("task_id") is None else str(doc["task_id"]))


def _simulation(sim: Any, source: str, index: int) -> Recorded:
    rec = _begun(sim, source, f"{source}#{index}", f"simulation {index}")
    if rec.unreadable is not None:
        return rec
    if "trial" in sim:
        rec.trial = _trial(sim["trial"], rec.notes)
    info = sim.get("reward_info")
    if info is None:
        rec.notes.append("no reward_info: the reward is unknown")
    elif not isinstance(info, dict):
        rec.notes.append(f"reward_info is {type(info).__name__}, not an object: the reward is "
                         "unknown")
    else:
        rec.reward = _reward(info.get("reward"), rec.notes)
        rec.checked_actions = _checked_actions(info.get("action_checks"))
    return _messages(rec, sim.get("messages"))


def _checked_actions(checks: Any) -> tuple[dict[str, Any], ...]:
    """The reference actions of τ²-bench's action checks (each check's ``action``, when it
    has a tool name and arguments)."""
    actions = [c.get("action") for c in checks if isinstance(c, dict)] \
        if isinstance(checks, list) else []
    return tuple({"action_id": a.get("action_id"), "name": a["name"],
                  "arguments": a["arguments"]} for a in actions
                 if isinstance(a, dict) and isinstance(a.get("name"), str)
                 and isinstance(a.get("arguments"), dict))


def _chat(doc: Any, source: str, line: int) -> Recorded:
    rec = _begun(doc, source, f"{source}:{line}", f"line {line}")
    if rec.unreadable is not None:
        return rec
    if "reward" in doc:
        rec.reward = _reward(doc["reward"], rec.notes)
    else:
        rec.notes.append("no reward: the reward is unknown")
    return _messages(rec, doc.get("messages"))


def _trial(value: Any, notes: list[str]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        notes.append(f"trial {value!r} is text; read as {int(value)}")
        return int(value)
    notes.append(f"trial {value!r} is not a whole number; left out")
    return None


def _text_id(value: Any, default: str) -> str:
    return default if value is None or isinstance(value, dict | list) else str(value)


def _reward(value: Any, notes: list[str]) -> float | None:
    """The reward as a number; a reward written as text is read and noted, anything else
    is unknown and noted (never guessed)."""
    if isinstance(value, bool):
        notes.append(f"reward {value!r} is a boolean; read as {float(value)}")
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            notes.append(f"reward {value!r} is text; read as {number}")
            return number
    notes.append(f"reward {value!r} is not a number: the reward is unknown")
    return None


def _messages(rec: Recorded, messages: Any) -> Recorded:
    if not isinstance(messages, list) or not messages:
        rec.unreadable = "no messages" if not messages else \
            f"messages is {type(messages).__name__}, not a list"
        return rec
    try:
        rec.items = _flatten(messages, rec.notes)
    except _Bad as exc:
        rec.unreadable = str(exc)
    return rec


def _flatten(messages: list[Any], notes: list[str]) -> list[Item]:
    items: list[Item] = []
    pending: dict[str, int] = {}  # call id -> index in items, waiting for its result
    order: list[int] = []         # calls without ids, in order
    for n, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise _Bad(f"message {n} is {type(msg).__name__}, not an object")
        turn = msg["turn_idx"] if isinstance(msg.get("turn_idx"), int) else n
        role = msg.get("role")
        if role == "assistant":
            _assistant(msg, turn, items, pending, order, notes)
        elif role == "user":
            _say(items, Hear(turn, _content(msg.get("content"), turn, "user")), notes)
        elif role == "tool":
            _tool_result(msg, turn, items, pending, order)
        elif role == "system":
            notes.append(f"system message at turn {turn} not replayed")
        else:
            raise _Bad(f"message {n} has role {role!r} (known: assistant, user, tool, system)")
    missing = [i for i in [*pending.values(), *order]]
    for i in missing:
        act = items[i]
        assert isinstance(act, Act)
        items[i] = Act(act.turn, act.tool, act.args, answered=False, text=act.text)
        notes.append(f"{act.tool} at turn {act.turn} has no recorded result")
    return items


def _assistant(msg: dict[str, Any], turn: int, items: list[Item], pending: dict[str, int],
               order: list[int], notes: list[str]) -> None:
    calls = msg.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _Bad(f"tool_calls at turn {turn} is {type(calls).__name__}, not a list")
    text = _assistant_text(msg.get("content"), turn, notes)
    if text and calls:
        notes.append(f"turn {turn} has both text and a tool call; the text goes with the "
                     "call, not to the customer")
    elif text:
        _say(items, Say(turn, text), notes)
    if len(calls) > 1:
        notes.append(f"turn {turn} makes {len(calls)} tool calls at once (the policy allows "
                     "one at a time); replayed one after the other")
    for n, call in enumerate(calls):
        tool, args, call_id = _call(call, turn)
        if call_id is None:
            order.append(len(items))
        else:
            pending[call_id] = len(items)
        items.append(Act(turn, tool, args, text=(text or None) if n == 0 else None))


def _say(items: list[Item], item: Say | Hear, notes: list[str]) -> None:
    """Two messages of one side in a row are one message (the other side answers both)."""
    last = items[-1] if items else None
    if type(last) is type(item) and last is not None and not isinstance(last, Act):
        items[-1] = type(item)(last.turn, f"{last.text}\n\n{item.text}")
        who = "agent" if isinstance(item, Say) else "customer"
        notes.append(f"the {who}'s messages at turns {last.turn} and {item.turn} are read "
                     "as one")
        return
    items.append(item)


def _assistant_text(content: Any, turn: int, notes: list[str]) -> str:
    text = _content(content, turn, "assistant")
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError:
            return text
        for key in ("message", "content", "text"):
            if isinstance(doc, dict) and set(doc) == {key} and isinstance(doc[key], str):
                notes.append(f"assistant content at turn {turn} is a JSON string; its "
                             f"{key!r} field is the message")
                return str(doc[key])
        # Other fields carry what the customer read too (ids, amounts): all of it is the
        # message, as the customer saw it.
        notes.append(f"assistant content at turn {turn} is a JSON object of several "
                     "fields; replayed whole, as the customer saw it")
    return text


def _content(content: Any, turn: int, who: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = [p.get("text") if isinstance(p, dict) else p for p in content]
        if all(isinstance(p, str) for p in parts):
            return "".join(parts)  # type: ignore[arg-type]
    raise _Bad(f"{who} content at turn {turn} is {type(content).__name__}, not text")


def _call(call: Any, turn: int) -> tuple[str, dict[str, Any], str | None]:
    if not isinstance(call, dict):
        raise _Bad(f"a tool call at turn {turn} is {type(call).__name__}, not an object")
    inner = call.get("function")
    fn: dict[str, Any] = inner if isinstance(inner, dict) else call
    name, raw = fn.get("name"), fn.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise _Bad(f"a tool call at turn {turn} has no tool name")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise _Bad(f"the arguments of {name} at turn {turn} are not JSON: {exc.msg}") \
                from None
    if not isinstance(raw, dict):
        raise _Bad(f"the arguments of {name} at turn {turn} are {type(raw).__name__}, "
                   "not an object")
    call_id = call.get("id")
    return name, raw, None if call_id is None else str(call_id)


def _tool_result(msg: dict[str, Any], turn: int, items: list[Item], pending: dict[str, int],
                 order: list[int]) -> None:
    call_id = msg.get("tool_call_id", msg.get("id"))
    if call_id is not None and str(call_id) in pending:
        index = pending.pop(str(call_id))
    elif order:
        index = order.pop(0)
    elif len(pending) == 1 and call_id is None:
        index = pending.popitem()[1]
    else:
        raise _Bad(f"the tool result at turn {turn} answers no call (id {call_id!r})")
    act = items[index]
    assert isinstance(act, Act)
    content = msg.get("content")
    error = _error(msg, content)
    if error is not None:
        items[index] = Act(act.turn, act.tool, act.args, error=error, text=act.text)
        return
    items[index] = Act(act.turn, act.tool, act.args, result=_decoded(content), text=act.text)


def _error(msg: dict[str, Any], content: Any) -> str | None:
    if msg.get("error") is True or msg.get("is_error") is True:
        return str(content)
    if isinstance(content, str) and content.startswith("Error:"):
        return content.removeprefix("Error:").strip()
    return None


def _decoded(content: Any) -> Any:
    """A result recorded as JSON text is its value; other text stays text."""
    if isinstance(content, str):
        try:
            return json.loads(content)
        except json.JSONDecodeError:
            return content
    return content
