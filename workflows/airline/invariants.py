"""The airline desk's invariants, proved by ``fsm verify airline``.

The four that carry the money:

- no write without a yes: every write runs only in a write state entered through the
  customer's ``confirmed``, bound to the proposal they confirmed, one call per yes;
- no cancellation without an eligible condition: ``cancel_reservation`` runs only after
  the guard of ``propose_cancel`` established ``cancellation_eligible``;
- no certificate to an ineligible customer: ``send_certificate`` only after the guard of
  ``propose_certificate`` established ``compensation_eligible``;
- no flight change on basic economy: ``update_reservation_flights`` only after the guard
  of ``propose_change`` established ``flight_change_allowed``.

And the conversation's shape: reservations are read only after the customer gave their
user id (``user_id_given``, fired only by their reply) or their profile was read
(``identified``, fired only by ``get_user_details``); only the customer's reply confirms;
nothing after the transfer; every conversation can end. What each guard checks is in
``workflows/airline/rules.py``, with tests against the real server.
"""

from fsm.auditor.verify import (
    AlwaysReaches,
    ConfirmedWrites,
    CustomerOnly,
    FiredOnlyByTools,
    Invariant,
    NothingAfter,
    OnlyThrough,
    ToolOnlyIn,
    ToolOnlyWith,
)

INVARIANTS: tuple[Invariant, ...] = (
    ConfirmedWrites(),
    *(OnlyThrough(state, "confirmed") for state in (
        "writing", "writing_change", "writing_cancel", "writing_certificate")),
    ToolOnlyIn("cancel_reservation", "writing_cancel"),
    ToolOnlyIn("send_certificate", "writing_certificate"),
    ToolOnlyIn("update_reservation_flights", "writing_change"),
    ToolOnlyWith("cancel_reservation", "cancellation_eligible"),
    ToolOnlyWith("send_certificate", "compensation_eligible"),
    ToolOnlyWith("update_reservation_flights", "flight_change_allowed"),
    ToolOnlyIn("get_reservation_details", "user_id_known", "serving"),
    OnlyThrough("user_id_known", "user_id_given"),
    OnlyThrough("serving", "identified"),
    FiredOnlyByTools("identified", "written", "transferred"),
    CustomerOnly("confirmed", "not_confirmed", "unanswered", "user_id_given"),
    NothingAfter(tool="transfer_to_human_agents"),
    AlwaysReaches("done", "abandoned", "transferred_to_human"),
)
