"""Scripted policies importable by ``fsm run --policy scripted_policies:<name>``.

Each process that loads one gets a fresh :class:`~fsm.testing.ScriptedPolicy`: the
script position must come from the run's transcript, not from the object.
"""

from __future__ import annotations

from refund_scripts import actions, large_refund, small_refund

from fsm.testing import ScriptedPolicy

#: Order A-1002 (₹1,800): pauses for a person after step 5.
LARGE = ScriptedPolicy(actions(large_refund()))
#: Order A-1001 (₹350), no person needed.
SMALL = ScriptedPolicy(actions(small_refund()))
