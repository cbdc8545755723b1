"""fsm: tool-using LLM agents run as explicit, checkpointed finite-state machines."""

# Names load on first use (PEP 562), so that ``import fsm.cli`` for ``fsm --help`` does not
# import the runtime, pydantic models and the adapters it does not need.
import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
    from fsm.agent import Agent, Tool
    from fsm.errors import (
        AccountError,
        ApprovalAlreadyDecided,
        ApprovalError,
        ApprovalExpired,
        ApprovalRefused,
        ApprovalStale,
        ConcurrentUpdate,
        DefinitionChanged,
        DiagramError,
        FSMError,
        GraphvizMissing,
        InboxRefused,
        InvalidRunState,
        InvariantError,
        LeaseLost,
        ModelConfigError,
        NothingPending,
        NotifyError,
        PriceError,
        RunError,
        RunLocked,
        RunNotFound,
        ScriptExhausted,
        ServeError,
        StoreError,
        TransitionRefused,
        UsageError,
        WorkflowDefinitionError,
        WorkflowNotFound,
    )
    from fsm.policy import Action, Policy, PolicyUnavailable, Usage, View
    from fsm.presentation import Presentation
    from fsm.records import (
        Approval,
        Budgets,
        Effect,
        Event,
        Pending,
        RunState,
        Used,
        ViewRecord,
    )
    from fsm.runtime.compaction import Compactor
    from fsm.runtime.engine import Engine
    from fsm.runtime.view import view_at
    from fsm.spec import ADVANCE, Guard, WorkflowSpec, define_workflow, guard
    from fsm.store import open_store
    from fsm.store.base import Store
    from fsm.store.memory import MemoryStore
    from fsm.store.sqlite import SQLiteStore
    from fsm.tools import NoArgs, ToolContext, ToolSpec

# Where each name lives: the same as the imports above.
_MODULES = {
    "fsm.agent": ("Agent", "Tool"),
    "fsm.errors": (
        "AccountError", "ApprovalAlreadyDecided", "ApprovalError", "ApprovalExpired",
        "ApprovalRefused", "ApprovalStale", "ConcurrentUpdate", "DefinitionChanged",
        "DiagramError", "FSMError", "GraphvizMissing", "InboxRefused", "InvalidRunState",
        "InvariantError", "LeaseLost", "ModelConfigError", "NothingPending", "NotifyError",
        "PriceError", "RunError", "RunLocked", "RunNotFound", "ScriptExhausted", "ServeError",
        "StoreError", "TransitionRefused", "UsageError", "WorkflowDefinitionError",
        "WorkflowNotFound",
    ),
    "fsm.policy": ("Action", "Policy", "PolicyUnavailable", "Usage", "View"),
    "fsm.presentation": ("Presentation",),
    "fsm.records": (
        "Approval", "Budgets", "Effect", "Event", "Pending", "RunState", "Used", "ViewRecord",
    ),
    "fsm.runtime.compaction": ("Compactor",),
    "fsm.runtime.engine": ("Engine",),
    "fsm.runtime.view": ("view_at",),
    "fsm.spec": ("ADVANCE", "Guard", "WorkflowSpec", "define_workflow", "guard"),
    "fsm.store": ("open_store",),
    "fsm.store.base": ("Store",),
    "fsm.store.memory": ("MemoryStore",),
    "fsm.store.sqlite": ("SQLiteStore",),
    "fsm.tools": ("NoArgs", "ToolContext", "ToolSpec"),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


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
    "AccountError",
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
    "DiagramError",
    "Effect",
    "Engine",
    "Event",
    "FSMError",
    "GraphvizMissing",
    "Guard",
    "InboxRefused",
    "InvalidRunState",
    "InvariantError",
    "LeaseLost",
    "MemoryStore",
    "ModelConfigError",
    "NoArgs",
    "NothingPending",
    "NotifyError",
    "Pending",
    "Policy",
    "PolicyUnavailable",
    "Presentation",
    "PriceError",
    "RunError",
    "RunLocked",
    "RunNotFound",
    "RunState",
    "SQLiteStore",
    "ScriptExhausted",
    "ServeError",
    "Store",
    "StoreError",
    "Tool",
    "ToolContext",
    "ToolSpec",
    "TransitionRefused",
    "Usage",
    "UsageError",
    "Used",
    "View",
    "ViewRecord",
    "WorkflowDefinitionError",
    "WorkflowNotFound",
    "WorkflowSpec",
    "define_workflow",
    "guard",
    "open_store",
    "view_at",
]
