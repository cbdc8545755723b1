"""The refund workflow's invariants, proved by ``fsm verify refund``.

Together they say: money moves only in ``refunding``, which is reached only after
``get_policy`` verified the order, and only after a person approved unless a guard
established that the amount is within the approval limit; only people approve,
decline or let a request expire; only the payment tool reports a refund's outcome,
at most once; every run can end.
"""

from fsm.auditor.verify import (
    AlwaysReaches,
    AtMostOnce,
    FiredOnlyByTools,
    HumanOnly,
    Invariant,
    NoReentryAfter,
    OnlyThrough,
    ToolOnlyAfter,
    ToolOnlyIn,
)

INVARIANTS: tuple[Invariant, ...] = (
    ToolOnlyIn("refund_item", "refunding"),
    OnlyThrough("refunding", "verified"),
    ToolOnlyAfter("refund_item", "approved", unless="amount_within_limit"),
    HumanOnly("approved", "declined", "expired"),
    AlwaysReaches("done", "handed_over"),
    AtMostOnce("refund_ok"),
    NoReentryAfter("refunding", "refund_ok"),
    FiredOnlyByTools("refund_ok", "refund_failed", "sent"),
)
