"""fsm: tool-using LLM agents run as explicit, checkpointed finite-state machines."""

from fsm.agent import Agent, Tool
from fsm.errors import (
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
    InvalidRunState,
    InvariantError,
    ModelConfigError,
    NothingPending,
    PriceError,
    RunError,
    RunLocked,
    RunNotFound,
    ScriptExhausted,
    StoreError,
    TransitionRefused,
    UsageError,
    WorkflowDefinitionError,
    WorkflowNotFound,
)
from fsm.policy import Action, Policy, PolicyUnavailable, Usage, View
from fsm.presentation import Presentation
from fsm.records import Approval, Budgets, Effect, Event, Pending, RunState, Used, ViewRecord
from fsm.runtime.compaction import Compactor
from fsm.runtime.engine import Engine
from fsm.runtime.view import view_at
from fsm.spec import ADVANCE, Guard, WorkflowSpec, define_workflow, guard
from fsm.store.base import Store
from fsm.store.memory import MemoryStore
from fsm.store.sqlite import SQLiteStore
from fsm.tools import NoArgs, ToolContext, ToolSpec

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
    "DiagramError",
    "Effect",
    "Engine",
    "Event",
    "FSMError",
    "GraphvizMissing",
    "Guard",
    "InvalidRunState",
    "InvariantError",
    "MemoryStore",
    "ModelConfigError",
    "NoArgs",
    "NothingPending",
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
    "view_at",
]
