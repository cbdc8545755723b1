"""fsm: tool-using LLM agents run as explicit, checkpointed finite-state machines."""

# Names load on first use (PEP 562), so that ``import fsm.cli`` for ``fsm --help`` does not
# import the runtime, pydantic models and the adapters it does not need.
import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
    from fsm.agent import Agent, Tool
    from fsm.definition.money import Currency
    from fsm.definition.presentation import Presentation
    from fsm.definition.sources import IDEMPOTENCY_META_KEY, ToolServer
    from fsm.definition.spec import ADVANCE, Guard, WorkflowSpec, define_workflow, guard
    from fsm.definition.tools import NoArgs, ToolContext, ToolSpec
    from fsm.errors import (
        AccountError,
        AmountError,
        ApprovalAlreadyDecided,
        ApprovalError,
        ApprovalExpired,
        ApprovalRefused,
        ApprovalStale,
        BundleError,
        ConcurrentUpdate,
        DefinitionChanged,
        DiagramError,
        EngineClosed,
        ForkRefused,
        FSMError,
        GraphvizMissing,
        HandoverRefused,
        InboxRefused,
        InvalidRunState,
        InvariantError,
        LeaseLost,
        MigrationRefused,
        ModelConfigError,
        NothingPending,
        NotifyError,
        PartlyApplied,
        PriceError,
        ReplyRefused,
        RowDamaged,
        RunError,
        RunLocked,
        RunNotFound,
        RunPruned,
        ScriptExhausted,
        ServeError,
        ServerChanged,
        SettingsError,
        SigningKeyError,
        StopDriving,
        StoreError,
        StoreUnavailable,
        SuiteError,
        TransitionRefused,
        Unavailable,
        UnreadableFile,
        UsageError,
        WorkflowCodeError,
        WorkflowDefinitionError,
        WorkflowNotFound,
    )
    from fsm.migration import Migration, Plan, migrate, plan_migration
    from fsm.migration.history import HistoryReport, check_history
    from fsm.observability.hooks import Hooks
    from fsm.policy import Action, Policy, PolicyRefused, PolicyUnavailable, Usage, View
    from fsm.records import (
        Approval,
        Budgets,
        DefinitionRecord,
        Effect,
        Event,
        Pending,
        RunState,
        Used,
        ViewRecord,
    )
    from fsm.runtime.async_engine import AsyncEngine
    from fsm.runtime.compaction import Compactor
    from fsm.runtime.config import EngineConfig
    from fsm.runtime.engine import Engine
    from fsm.runtime.forking import fork
    from fsm.runtime.observe import Outcome
    from fsm.runtime.retry import Retry
    from fsm.runtime.view import view_at
    from fsm.sandbox import evaluate, load_suite, replay
    from fsm.settings import Settings
    from fsm.store import open_store
    from fsm.store.base import Store
    from fsm.store.memory import MemoryStore
    from fsm.store.sqlite import SQLiteStore

# Where each name lives: the same as the imports above.
_MODULES = {
    "fsm.agent": ("Agent", "Tool"),
    "fsm.errors": (
        "AccountError", "ApprovalAlreadyDecided", "ApprovalError", "ApprovalExpired",
        "ApprovalRefused", "ApprovalStale", "ConcurrentUpdate", "DefinitionChanged",
        "DiagramError", "EngineClosed", "FSMError", "GraphvizMissing", "InboxRefused",
        "InvalidRunState",
        "InvariantError", "LeaseLost", "MigrationRefused", "ModelConfigError",
        "NothingPending", "NotifyError", "PartlyApplied",
        "PriceError", "RunError", "RunLocked", "RunNotFound", "RunPruned", "ScriptExhausted",
        "ServeError", "ServerChanged",
        "StopDriving", "StoreError", "StoreUnavailable", "TransitionRefused", "Unavailable",
        "UsageError",
        "WorkflowDefinitionError", "WorkflowNotFound", "WorkflowCodeError", "AmountError",
        "BundleError", "HandoverRefused",
        "ReplyRefused",
        "RowDamaged",
        "ForkRefused", "SuiteError",
        "SettingsError", "SigningKeyError", "UnreadableFile",
    ),
    "fsm.observability.hooks": ("Hooks",),
    "fsm.definition.sources": ("IDEMPOTENCY_META_KEY", "ToolServer"),
    "fsm.definition.money": ("Currency",),
    "fsm.migration": ("Migration", "Plan", "migrate", "plan_migration"),
    "fsm.migration.history": ("HistoryReport", "check_history"),
    "fsm.policy": ("Action", "Policy", "PolicyRefused", "PolicyUnavailable", "Usage", "View"),
    "fsm.definition.presentation": ("Presentation",),
    "fsm.records": (
        "Approval", "Budgets", "DefinitionRecord", "Effect", "Event", "Pending", "RunState",
        "Used", "ViewRecord",
    ),
    "fsm.runtime.compaction": ("Compactor",),
    "fsm.runtime.async_engine": ("AsyncEngine",),
    "fsm.runtime.config": ("EngineConfig",),
    "fsm.runtime.engine": ("Engine",),
    "fsm.runtime.forking": ("fork",),
    "fsm.runtime.observe": ("Outcome",),
    "fsm.runtime.retry": ("Retry",),
    "fsm.runtime.view": ("view_at",),
    "fsm.sandbox": ("evaluate", "load_suite", "replay"),
    "fsm.settings": ("Settings",),
    "fsm.definition.spec": ("ADVANCE", "Guard", "WorkflowSpec", "define_workflow", "guard"),
    "fsm.store": ("open_store",),
    "fsm.store.base": ("Store",),
    "fsm.store.memory": ("MemoryStore",),
    "fsm.store.sqlite": ("SQLiteStore",),
    "fsm.definition.tools": ("NoArgs", "ToolContext", "ToolSpec"),
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
    "AmountError",
    "Approval",
    "ApprovalAlreadyDecided",
    "ApprovalError",
    "ApprovalExpired",
    "ApprovalRefused",
    "ApprovalStale",
    "AsyncEngine",
    "Budgets",
    "BundleError",
    "Compactor",
    "ConcurrentUpdate",
    "Currency",
    "DefinitionChanged",
    "DefinitionRecord",
    "DiagramError",
    "Effect",
    "Engine",
    "EngineClosed",
    "EngineConfig",
    "Event",
    "FSMError",
    "ForkRefused",
    "GraphvizMissing",
    "Guard",
    "HandoverRefused",
    "HistoryReport",
    "Hooks",
    "IDEMPOTENCY_META_KEY",
    "InboxRefused",
    "InvalidRunState",
    "InvariantError",
    "LeaseLost",
    "MemoryStore",
    "Migration",
    "MigrationRefused",
    "ModelConfigError",
    "NoArgs",
    "NothingPending",
    "NotifyError",
    "Outcome",
    "PartlyApplied",
    "Pending",
    "Plan",
    "Policy",
    "PolicyRefused",
    "PolicyUnavailable",
    "Presentation",
    "PriceError",
    "ReplyRefused",
    "Retry",
    "RowDamaged",
    "RunError",
    "RunLocked",
    "RunNotFound",
    "RunPruned",
    "RunState",
    "SQLiteStore",
    "ScriptExhausted",
    "ServeError",
    "ServerChanged",
    "Settings",
    "SettingsError",
    "SigningKeyError",
    "StopDriving",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "SuiteError",
    "Tool",
    "ToolContext",
    "ToolServer",
    "ToolSpec",
    "TransitionRefused",
    "Unavailable",
    "UnreadableFile",
    "Usage",
    "UsageError",
    "Used",
    "View",
    "ViewRecord",
    "WorkflowCodeError",
    "WorkflowDefinitionError",
    "WorkflowNotFound",
    "WorkflowSpec",
    "check_history",
    "define_workflow",
    "evaluate",
    "fork",
    "guard",
    "load_suite",
    "migrate",
    "open_store",
    "plan_migration",
    "replay",
    "view_at",
]
