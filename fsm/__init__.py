"""fsm: tool-using LLM agents run as explicit, checkpointed finite-state machines."""

# Names load on first use (PEP 562), so that ``import fsm.cli`` for ``fsm --help`` does not
# import the runtime, pydantic models and the adapters it does not need.
import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
    from fsm.agent import Agent, Tool
    from fsm.errors import (
        ApprovalAlreadyDecided,
        ApprovalError,
        ApprovalExpired,
        ApprovalRefused,
        ApprovalStale,
        ConcurrentUpdate,
        DefinitionChanged,
        FSMError,
        InvalidRunState,
        NothingPending,
        RunError,
        RunLocked,
        RunNotFound,
        TransitionRefused,
        WorkflowDefinitionError,
    )
    from fsm.policy import Action, Policy, PolicyUnavailable, Usage, View
    from fsm.records import Approval, Budgets, Effect, Event, Pending, RunState, Used, ViewRecord
    from fsm.runtime.compaction import Compactor
    from fsm.runtime.engine import Engine
    from fsm.runtime.view import view_at
    from fsm.spec import ADVANCE, Guard, WorkflowSpec, define_workflow, guard
    from fsm.store.base import Store
    from fsm.store.memory import MemoryStore
    from fsm.store.schema import StoreError
    from fsm.store.sqlite import SQLiteStore
    from fsm.tools import NoArgs, ToolContext, ToolSpec

_LAZY = {
    "ADVANCE": "fsm.spec",
    "Action": "fsm.policy",
    "Agent": "fsm.agent",
    "Approval": "fsm.records",
    "ApprovalAlreadyDecided": "fsm.errors",
    "ApprovalError": "fsm.errors",
    "ApprovalExpired": "fsm.errors",
    "ApprovalRefused": "fsm.errors",
    "ApprovalStale": "fsm.errors",
    "Budgets": "fsm.records",
    "Compactor": "fsm.runtime.compaction",
    "ConcurrentUpdate": "fsm.errors",
    "DefinitionChanged": "fsm.errors",
    "Effect": "fsm.records",
    "Engine": "fsm.runtime.engine",
    "Event": "fsm.records",
    "FSMError": "fsm.errors",
    "Guard": "fsm.spec",
    "InvalidRunState": "fsm.errors",
    "MemoryStore": "fsm.store.memory",
    "NoArgs": "fsm.tools",
    "NothingPending": "fsm.errors",
    "Pending": "fsm.records",
    "Policy": "fsm.policy",
    "PolicyUnavailable": "fsm.policy",
    "RunError": "fsm.errors",
    "RunLocked": "fsm.errors",
    "RunNotFound": "fsm.errors",
    "RunState": "fsm.records",
    "SQLiteStore": "fsm.store.sqlite",
    "Store": "fsm.store.base",
    "StoreError": "fsm.store.schema",
    "Tool": "fsm.agent",
    "ToolContext": "fsm.tools",
    "ToolSpec": "fsm.tools",
    "TransitionRefused": "fsm.errors",
    "Usage": "fsm.policy",
    "Used": "fsm.records",
    "View": "fsm.policy",
    "ViewRecord": "fsm.records",
    "WorkflowDefinitionError": "fsm.errors",
    "WorkflowSpec": "fsm.spec",
    "define_workflow": "fsm.spec",
    "guard": "fsm.spec",
    "view_at": "fsm.runtime.view",
}


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fsm' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ADVANCE",
    "Action",
    "Agent",
    "Approval",
    "ApprovalAlreadyDecided",
    "ApprovalError",
    "ApprovalExpired",
    "ApprovalRefused",
    "ApprovalStale",
    "Budgets",
    "Compactor",
    "ConcurrentUpdate",
    "DefinitionChanged",
    "Effect",
    "Engine",
    "Event",
    "FSMError",
    "Guard",
    "InvalidRunState",
    "MemoryStore",
    "NoArgs",
    "NothingPending",
    "Pending",
    "Policy",
    "PolicyUnavailable",
    "RunError",
    "RunLocked",
    "RunNotFound",
    "RunState",
    "SQLiteStore",
    "Store",
    "StoreError",
    "Tool",
    "ToolContext",
    "ToolSpec",
    "TransitionRefused",
    "Usage",
    "Used",
    "View",
    "ViewRecord",
    "WorkflowDefinitionError",
    "WorkflowSpec",
    "define_workflow",
    "guard",
    "view_at",
]
