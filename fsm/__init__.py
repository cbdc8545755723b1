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
    FSMError,
    InvalidRunState,
    LeaseLost,
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
from fsm.store import open_store
from fsm.store.base import Store
from fsm.store.memory import MemoryStore
from fsm.store.schema import StoreError
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
    "Effect",
    "Engine",
    "Event",
    "FSMError",
    "Guard",
    "InvalidRunState",
    "LeaseLost",
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
    "open_store",
    "view_at",
]
