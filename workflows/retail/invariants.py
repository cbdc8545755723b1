"""The retail desk's invariants, proved by ``fsm verify retail``.

Together they say: the desk reads a customer's profile or orders only after it found who
the customer is (``authenticated``, fired only by the result of a user lookup); it
changes the database only in ``writing``, each write only after the customer's explicit
yes to exactly that call, one write per yes; only the customer's reply confirms or
declines, or asks for a human agent; nothing happens after ``transfer_to_human_agents``;
every conversation can end.

What the tables cannot say (the order is the customer's, read first, in the right
status, items modified once, an allowed reason, a refund to the paying method or a gift
card; a transfer only when the customer asked for a human or the desk cannot act) is the
``propose`` guard's, the transfer's gate check on the run's facts, and the write's own
check on the database rows (``workflows/retail/rules.py``), with tests.
"""

from fsm.auditor.verify import (
    AlwaysReaches,
    ConfirmedWrites,
    CustomerOnly,
    FiredOnlyByTools,
    Invariant,
    NothingAfter,
    OnlyThrough,
    ToolOnlyAfter,
    ToolOnlyIn,
)
from workflows.retail.operations import WRITES

INVARIANTS: tuple[Invariant, ...] = (
    ToolOnlyAfter("get_user_details", "authenticated", by_person=False),
    ToolOnlyAfter("get_order_details", "authenticated", by_person=False),
    FiredOnlyByTools("authenticated", "written", "transferred"),
    OnlyThrough("serving", "authenticated"),
    *(ToolOnlyIn(tool, "writing") for tool in sorted(WRITES)),
    OnlyThrough("writing", "confirmed"),
    ConfirmedWrites(),
    CustomerOnly("confirmed", "not_confirmed", "unanswered", "asked_for_human"),
    NothingAfter(tool="transfer_to_human_agents"),
    AlwaysReaches("done", "abandoned", "transferred_to_human"),
)
