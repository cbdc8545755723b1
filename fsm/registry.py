"""Finding workflows and policies by name: an entry point, or ``module:attr``."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from fsm.errors import FSMError, WorkflowNotFound
from fsm.spec import WorkflowSpec

GROUP = "fsm.workflows"


def _problem(exc: BaseException) -> str:
    """An exception of user code in one line: its type and the first line of its text."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    if not module or module.startswith("."):
        raise WorkflowNotFound(f"cannot import {target!r}: give an absolute module name "
                               "before the colon, e.g. mypackage.flows:SPEC")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise WorkflowNotFound(f"cannot import {target!r}: {exc}") from None
    except Exception as exc:  # user code: any failure is reported, in one line
        raise WorkflowNotFound(f"cannot import {target!r}: {_problem(exc)}") from None
    return obj


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
    """The ``POLICY`` shipped next to a registered workflow, if any."""
    names = registered()
    target = name if ":" in name else names.get(name, "")
    module = target.partition(":")[0]
    if not module:
        return None
    return getattr(importlib.import_module(module), "POLICY", None)


def load_policy(target: str) -> Any:
    """A policy given as ``module:attr``."""
    if ":" not in target:
        raise WorkflowNotFound(f"policy {target!r} must be given as module:attr")
    obj = _import(target)
    if not callable(obj):
        raise WorkflowNotFound(f"policy {target!r} is not callable")
    return obj
