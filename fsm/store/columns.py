"""The columns of the tables every SQL store keeps, in the order stores write them."""

from __future__ import annotations

EVENT_COLUMNS = (
    "run_id", "seq", "step", "time", "kind", "state_before", "state_after", "tool", "event",
    "reason", "cost_micros", "tokens", "reviewer", "detail", "prev_hash", "hash",
)
APPROVAL_COLUMNS = (
    "approval_id", "run_id", "step", "tool", "args", "args_hash", "run_version",
    "requested_at", "expires_at", "decision", "reviewer", "note", "decided_at",
    "approved_args",
)
EFFECT_COLUMNS = ("key", "run_id", "step", "tool", "args", "status", "result", "error",
                  "started_at", "finished_at")
ACCOUNT_COLUMNS = ("name", "role", "password_hash", "release_limit", "disabled", "created_at",
                   "updated_at")
REFUSAL_COLUMNS = ("refusal_id", "run_id", "approval_id", "account", "action", "code",
                   "reason", "at", "remote")
NOTIFICATION_COLUMNS = ("key", "run_id", "approval_id", "kind", "created_at", "status",
                        "attempts", "next_attempt_at", "last_error", "delivered_at")
