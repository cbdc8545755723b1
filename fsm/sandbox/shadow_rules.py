"""How a recorded agent's prose is read in shadow: which answer is a yes, and what a
proposal must name.

A live desk shows the customer a proposal rendered by fsm from the exact call. A recorded
agent wrote its own. In shadow, a write is confirmed only when the agent's last message
before the customer's answer names what the call changes, and the answer is an explicit
yes. A workflow says what that means in its own words with a :class:`ProseRules`:

- :meth:`ProseRules.answer`: ``"yes"``, ``"no"``, ``"conditional"`` (a yes on a condition)
  or ``None`` (neither) for the customer's text;
- :meth:`ProseRules.mentions`: the things a proposal of ``tool(args)`` must name (ids,
  amounts), each with the spellings that count, given what the recorded agent had read.

:class:`PlainRules` is the default for a workflow that gives none: the workflow's own
``interpret`` hook judges the answer, and a proposal must name every value of the call's
arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from fsm.definition.spec import WorkflowSpec

__all__ = ["Answer", "Mention", "PlainRules", "ProseRules", "Seen", "missing", "named"]

#: What the customer's answer is: a yes, a no, or a yes on a condition the recording
#: cannot settle ("if it is the cheapest: yes"), which makes the conversation unmappable.
Answer = Literal["yes", "no", "conditional"]


@dataclass(frozen=True)
class Mention:
    """One thing a proposal must name."""

    #: What it is, for the report (e.g. ``"order '#W1234567'"``).
    what: str
    #: The spellings any one of which names it (matched whole, case and spacing aside).
    spellings: tuple[str, ...]
    #: Groups of words that name it together, every word of one group (e.g. an item's
    #: options, an address's first line, city and zip).
    together: tuple[tuple[str, ...], ...] = ()

    def named_in(self, text: str) -> bool:
        return any(named(text, s) for s in self.spellings) or \
            any(all(named(text, w) for w in group) for group in self.together)


@dataclass(frozen=True)
class Seen:
    """What the recorded agent had read when it proposed: ``(tool, args, result)`` of each
    read that succeeded, in order."""

    reads: tuple[tuple[str, Mapping[str, Any], Any], ...] = ()

    def last(self, tool: str, **args: Any) -> Any:
        """The latest result of ``tool`` called with (at least) ``args``, or ``None``."""
        for name, called, result in reversed(self.reads):
            if name == tool and all(called.get(k) == v for k, v in args.items()):
                return result
        return None


class ProseRules(Protocol):
    """A workflow's rules for reading recorded prose (see the module's docstring)."""

    #: The rules in a sentence or two, for the report.
    summary: str

    def answer(self, text: str) -> Answer | None: ...

    def mentions(self, tool: str, args: Mapping[str, Any], seen: Seen) -> list[Mention]: ...


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("\u2019", "'").split())


def named(text: str, spelling: str) -> bool:
    """Whether ``text`` names ``spelling``: it appears whole (not inside a longer word or
    number), case and spacing aside."""
    s = _norm(spelling)
    if not s:
        return True
    pattern = (r"(?<![a-z0-9])" if s[0].isalnum() else "") + re.escape(s) + \
        (r"(?![a-z0-9])" if s[-1].isalnum() else "")
    return re.search(pattern, _norm(text)) is not None


def missing(text: str, mentions: Sequence[Mention]) -> list[str]:
    """What of ``mentions`` the proposal ``text`` does not name."""
    return [m.what for m in mentions if not m.named_in(text)]


def leaves(value: Any) -> list[str]:
    """The scalar values inside ``value``, as text."""
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list | tuple):
        return [x for v in value for x in leaves(v)]
    if value is None or isinstance(value, bool) or value == "":
        return []
    return [str(value)]


class PlainRules:
    """The default: the workflow's ``interpret`` judges the answer (as if to this very
    proposal), and a proposal names every value of the call's arguments."""

    summary = ("an answer is a yes when the workflow's own interpret hook confirms it; a "
               "proposal must name every value of the call's arguments")

    def __init__(self, spec: WorkflowSpec) -> None:
        self.spec = spec

    def answer(self, text: str) -> Answer | None:
        if self.spec.interpret is None:
            return None
        event = self.spec.interpret(text, {"tool": "", "args": {}})
        if event == self.spec.confirm_event:
            return "yes"
        return "no" if event is not None else None

    def mentions(self, tool: str, args: Mapping[str, Any], seen: Seen) -> list[Mention]:
        return [Mention(f"{tool} argument {v!r}", (v,)) for v in leaves(args)]


def rules_for(ref: str, spec: WorkflowSpec) -> ProseRules:
    """The prose rules of the workflow ``ref`` names: the ``SHADOW`` object next to it in
    its module (``workflows.retail`` for ``retail``), else :class:`PlainRules`."""
    import importlib

    from fsm.definition.registry import registered

    target = registered().get(ref, ref)
    module = target.split(":")[0] if ":" in target else None
    if module is None:
        return PlainRules(spec)
    try:
        found = getattr(importlib.import_module(module), "SHADOW", None)
    except ImportError:
        found = None
    return found if found is not None else PlainRules(spec)
