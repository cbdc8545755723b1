"""Facts a guard reads that nothing ever sets: a warning of ``fsm verify``.

A run's facts change only through ``records=`` (an event's payload kept under a key)
and the tools' ``remember`` hooks. A guard that reads a key neither sets (a typo such as
``facts["acount"]``) can never see it, whatever the model does. This module reads the
source of the guards and hooks (the keys of ``facts["k"]``, ``facts.get("k")`` and
``"k" in facts``, following the facts into functions the code calls with them, and the
keys of the dicts the hooks return) and names each such key. Code whose source cannot be
read, or a hook that returns a dict it builds at run time, is not guessed at: the check
then says nothing about it.
"""

from __future__ import annotations

import ast
import inspect
import types
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from fsm.auditor.invariants import ToolOnlyAfter
from fsm.definition.guards import Guard
from fsm.definition.spec import WorkflowSpec

#: How deep the facts are followed into the functions a guard calls with them.
DEPTH = 3


@lru_cache(maxsize=64)
def _module_tree(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8") as f:
            return ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None


def _node(fn: Any) -> ast.FunctionDef | ast.Lambda | None:
    """The definition of the Python function ``fn`` in its source file, if readable."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        return None
    tree = _module_tree(path) if path else None
    if tree is None:
        return None
    names = list(code.co_varnames[:code.co_argcount])
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        lines = {node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))}
        if code.co_firstlineno in lines and [a.arg for a in node.args.args] == names:
            return node  # type: ignore[return-value]
    return None


def _resolve(fn: Any, name: str) -> Any:
    """The object ``name`` means inside ``fn``: a closure cell, else a global."""
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None) or ()
    if code is not None and name in code.co_freevars:
        try:
            return closure[code.co_freevars.index(name)].cell_contents
        except (IndexError, ValueError):
            return None
    return getattr(fn, "__globals__", {}).get(name)


def reads(fn: Any, position: int = 0, depth: int = DEPTH) -> set[str] | None:
    """The fact keys ``fn`` reads from its argument at ``position``; ``None`` when its
    source cannot be read."""
    node = _node(fn)
    if node is None:
        return None
    params = [a.arg for a in node.args.args]
    if position >= len(params):
        return set()
    facts = params[position]
    found: set[str] = set()
    for sub in ast.walk(node):
        key = _read_key(sub, facts)
        if key is not None:
            found.add(key)
        if depth > 0 and isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            for i in _passed_at(sub, facts):
                inner = reads(_resolve(fn, sub.func.id), i, depth - 1)
                found |= inner or set()
    return found


def _read_key(node: ast.AST, facts: str) -> str | None:
    """``facts["k"]``, ``facts.get("k")`` or ``"k" in facts``: ``"k"``."""
    if isinstance(node, ast.Subscript) and _is(node.value, facts):
        return _text(node.slice)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "get" and _is(node.func.value, facts) and node.args:
        return _text(node.args[0])
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
            isinstance(node.ops[0], ast.In | ast.NotIn) and _is(node.comparators[0], facts):
        return _text(node.left)
    return None


def _passed_at(call: ast.Call, facts: str) -> Iterator[int]:
    for i, arg in enumerate(call.args):
        if _is(arg, facts):
            yield i


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def sets(fn: Any) -> set[str] | None:
    """The keys of the dicts a ``remember`` hook returns; ``None`` when they cannot be
    read (no source, or a dict built at run time)."""
    node = _node(fn)
    if node is None:
        return None
    returned = [node.body] if isinstance(node, ast.Lambda) else \
        [r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None]
    keys: set[str] = set()
    for value in returned:
        if not isinstance(value, ast.Dict):
            return None
        for k in value.keys:
            text = None if k is None else _text(k)
            if text is None:
                return None  # {**other} or a computed key
            keys.add(text)
    return keys


def fact_warnings(spec: WorkflowSpec) -> list[str]:
    """One line per guard that reads a fact nothing sets, and per ``unless=`` whose every
    establishing guard does; empty when a hook's facts cannot be read."""
    known = set(spec.records.values())
    for tool in spec.tools.values():
        if tool.remember is not None:
            keys = sets(tool.remember)
            if keys is None:
                return []  # that hook may set anything: nothing can be said
            known |= keys
    setters = f"the facts set are {_names(sorted(known))}" if known else "no fact is ever set"
    broken: dict[str, list[str]] = {}
    out: list[str] = []
    for event, g in sorted(spec.guards.items()):
        if not isinstance(g, Guard):
            continue
        unset = sorted((reads(g.fn) or set()) - known)
        if unset:
            broken[event] = unset
            out.append(f"the guard of {event!r} ({g.description}) reads "
                       f"{_names(unset)}, which no event's record and no remember hook "
                       f"sets ({setters}): it can never see {_names(unset)}")
    out += _unless_warnings(spec, broken)
    return out


def _unless_warnings(spec: WorkflowSpec, broken: dict[str, list[str]]) -> list[str]:
    out = []
    for inv in spec.invariants:
        if not isinstance(inv, ToolOnlyAfter) or inv.unless is None:
            continue
        by = [e for e, g in sorted(spec.guards.items())
              if isinstance(g, Guard) and inv.unless in g.establishes]
        if by and all(e in broken for e in by):
            out.append(f"{inv.title.replace('`', '')}: {inv.unless!r} is established only "
                       f"by the guard of {_names(by)}, which reads facts nothing sets")
    return out


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)
