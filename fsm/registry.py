"""Finding workflows and policies by name: an entry point, or ``module:attr``."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from fsm.errors import WorkflowNotFound
from fsm.spec import WorkflowSpec

GROUP = "fsm.workflows"


def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise WorkflowNotFound(f"cannot import {target!r}: {exc}") from None
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
        obj = obj()
    if not isinstance(obj, WorkflowSpec):
        raise WorkflowNotFound(f"{name!r} is a {type(obj).__name__}, not a workflow spec")
    return obj


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
