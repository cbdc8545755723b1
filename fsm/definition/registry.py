"""Finding workflows and policies by name: an entry point, or ``module:attr``.

A ``module:attr`` reference is imported the way ``python -m`` finds modules: the current
directory first, then ``PYTHONPATH``, then the installed packages. ``attr`` is a dotted
path inside the module. A workflow reference names a :class:`~fsm.definition.spec.WorkflowSpec` or
a function taking no arguments that returns one; a policy reference names a policy (a
callable ``view -> Action``) or a function taking no arguments that returns one.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from importlib.metadata import entry_points
from typing import Any

from fsm.definition.spec import WorkflowSpec
from fsm.errors import FSMError, WorkflowDefinitionError, WorkflowNotFound

GROUP = "fsm.workflows"

#: Where ``module:attr`` modules are looked up, as ``--help`` and the errors say it.
LOOKUP = ("the current directory, then PYTHONPATH, then the installed packages "
          "(as python -m finds modules)")


def _problem(exc: BaseException) -> str:
    """An exception of user code in one line: its type and the first line of its text."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _search_current_directory() -> None:
    """Put the current directory first on ``sys.path``, as ``python -m`` does (a console
    script such as ``fsm`` starts with its own folder there instead)."""
    here = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == here for p in sys.path):
        sys.path.insert(0, here)
        importlib.invalidate_caches()


def _not_found(target: str, module: str, exc: ModuleNotFoundError) -> WorkflowNotFound:
    """A module of the reference that is nowhere: where it was looked for, what to do."""
    missing = exc.name or module
    if not (module == missing or module.startswith(missing + ".")):
        # The reference's module exists but imports something missing: its own problem.
        return WorkflowNotFound(f"cannot import {target!r}: {exc}")
    path = missing.replace(".", os.sep)
    return WorkflowNotFound(
        f"cannot import {target!r}: no module named {missing!r} in {LOOKUP}; the current "
        f"directory is {os.getcwd()}: run fsm from the folder that holds {path}.py (or "
        f"{path}/__init__.py), or add that folder to PYTHONPATH")


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    if not module or module.startswith("."):
        raise WorkflowNotFound(f"cannot import {target!r}: give an absolute module name "
                               "before the colon, e.g. mypackage.flows:SPEC")
    _search_current_directory()
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except WorkflowDefinitionError:
        raise  # a workflow defined at import with bad tables: every problem, as it is
    except ModuleNotFoundError as exc:
        raise _not_found(target, module, exc) from None
    except (ImportError, AttributeError) as exc:
        raise WorkflowNotFound(f"cannot import {target!r}: {exc}") from None
    except Exception as exc:  # user code: any failure is reported, in one line
        raise WorkflowNotFound(f"cannot import {target!r}: {_problem(exc)}") from None
    return obj


def load_object(target: str) -> Any:
    """The object ``module:attr`` names (a suite, a check), imported as workflows and
    policies are; :class:`~fsm.errors.WorkflowNotFound` in one line when it cannot be."""
    return _import(target)


def registered() -> dict[str, str]:
    """Registered workflow names → ``module:attr``."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def load_workflow(name: str) -> WorkflowSpec:
    """A registered workflow name (e.g. ``refund``) or ``module:attr``."""
    names = registered()
    if ":" in name:
        obj = _import(name)
    elif name in names:
        obj = _import(names[name])
    else:
        known = ", ".join(sorted(names)) or "none"
        raise WorkflowNotFound(
            f"unknown workflow {name!r} (registered: {known}; or give module:attr)")
    if callable(obj) and not isinstance(obj, WorkflowSpec):
        obj = _built(name, obj)
    if not isinstance(obj, WorkflowSpec):
        raise WorkflowNotFound(f"{name!r} is {_a(type(obj).__name__)}, not a workflow spec")
    return obj


def _built(name: str, factory: Any) -> Any:
    """What a workflow factory returns; its definition errors pass through as they are."""
    try:
        return factory()
    except FSMError:
        raise
    except Exception as exc:  # user code: any failure is reported, in one line
        raise WorkflowNotFound(f"workflow {name!r}: calling it with no arguments failed "
                               f"({_problem(exc)}); give a WorkflowSpec or a function that "
                               "takes none") from None


def _a(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


def default_policy(name: str) -> Any:
    """The ``POLICY`` of the module a workflow comes from, if it has one: a policy, a
    function taking no arguments that returns one, or a ``module:attr`` text naming
    either."""
    names = registered()
    target = name if ":" in name else names.get(name, "")
    module = target.partition(":")[0]
    if not module:
        return None
    found = getattr(_import(module + ":"), "POLICY", None)
    if found is None:
        return None
    if isinstance(found, str):
        return load_policy(found)
    return _policy(f"{module}:POLICY", found)


def load_policy(target: str) -> Any:
    """A policy given as ``module:attr``: the policy itself, or a function taking no
    arguments that returns one."""
    if ":" not in target:
        raise WorkflowNotFound(f"policy {target!r} must be given as module:attr")
    return _policy(target, _import(target))


def _policy(target: str, obj: Any) -> Any:
    if not callable(obj):
        raise WorkflowNotFound(f"policy {target!r} is {_a(type(obj).__name__)}, not callable; "
                               "give a policy (view -> Action) or a function taking no "
                               "arguments that returns one")
    if not _takes_no_arguments(obj):
        return obj
    try:
        made = obj()
    except FSMError:
        raise
    except Exception as exc:  # user code: any failure is reported, in one line
        raise WorkflowNotFound(f"policy {target!r}: calling it with no arguments failed "
                               f"({_problem(exc)})") from None
    if not callable(made) or _takes_no_arguments(made):
        raise WorkflowNotFound(f"policy {target!r} takes no arguments, so it was called as a "
                               f"factory, but it returned {_a(type(made).__name__)}, not a "
                               "policy (a callable taking the view)")
    return made


def _takes_no_arguments(fn: Any) -> bool:
    """True for a callable that can be called with no arguments at all (a factory); a
    policy takes the view."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: taken as a policy
        return False
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return False
        if p.default is p.empty:
            return False
    return True
