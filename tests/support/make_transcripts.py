"""Write a database of runs whose transcripts hold every message shape fsm stores.

    python tests/support/make_transcripts.py OUT.db

``tests/store/data/transcripts.sql`` is the dump (``sqlite3 OUT.db .dump``, with its
``PRAGMA user_version``) of what this script wrote with the code of the day before the
transcript became typed; ``tests/store/test_transcript_json.py`` reads it back and writes
the same runs again.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chat_desk import Ledger  # noqa: E402
from chat_desk import build as chat_build  # noqa: E402
from refund_scripts import actions, large_refund, small_refund  # noqa: E402

from fsm import Engine, SQLiteStore  # noqa: E402
from fsm.testing import ScriptedPolicy  # noqa: E402
from workflows.refund import Shop, build  # noqa: E402

LARGE = "Order A-1002: my headphones stopped working, I want my money back"
CANCEL = {"order_id": "A-1001", "reason": "no longer needed"}
#: A model that errs first: a call not allowed, a final answer too soon, plain text.
MESSY = [{"tool": "refund_item",
          "args": {"order_id": "A-1001", "item_id": "kettle-1", "amount_paise": 35000}},
         {"final": "All done!"}, {"text": "Let me look."},
         {"tool": "get_order", "args": {"order_id": "A-1001"}, "text": "Looking it up."},
         *actions(small_refund())[1:]]
#: A conversation: a question, a proposal, the customer's yes, the cancellation.
CHAT = [{"final": "Which order would you like to cancel?"},
        {"tool": "get_order", "args": {"order_id": "A-1001"}},
        {"tool": "advance", "text": f"I will cancel with {CANCEL}. Go ahead? (yes/no)",
         "args": {"event": "propose", "tool": "cancel_order", "args": CANCEL}},
        {"tool": "cancel_order", "args": CANCEL},
        {"tool": "advance", "args": {"event": "nothing_to_do"}}]


class Clock:
    """Half a second a reading, from a fixed start: the same runs write the same rows."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def write(out: str) -> None:
    """The runs: a refund approved lower, one declined, a model that errs first, and a
    conversation with the customer (a question, a proposal, the customer's yes)."""
    Path(out).unlink(missing_ok=True)
    store, clock = SQLiteStore(out), Clock()
    spec = build(Shop(out).seed_demo())
    e = Engine(spec, store, ScriptedPolicy(actions(large_refund())), clock=clock)
    e.start(LARGE, user="ravi", run_id="lowered")
    e.decide("lowered", True, "supervisor", "lower", amend={"amount_paise": 120_000})
    e = Engine(spec, store, ScriptedPolicy(actions(large_refund())), clock=clock)
    e.start(LARGE, user="ravi", run_id="declined")
    e.decide("declined", False, "supervisor", "no")
    Engine(spec, store, ScriptedPolicy(MESSY), clock=clock).start(
        "Order A-1001: the kettle arrived broken", user="asha", run_id="messy")
    chat = Engine(chat_build(Ledger()), store, ScriptedPolicy(CHAT), clock=clock)
    chat.start("I want to cancel an order", user="asha", run_id="chat")
    chat.reply("chat", "A-1001 please")
    chat.reply("chat", "yes")
    store.close()


if __name__ == "__main__":
    write(sys.argv[1])
