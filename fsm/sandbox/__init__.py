"""Replaying stored runs and evaluating policies, in sandboxes that touch nothing real.

- :mod:`fsm.sandbox.replay`: drive a policy against a recorded run (``fsm replay``) and
  compare the two step by step.
- :mod:`fsm.sandbox.suite`: evaluation suites, read from YAML (``fsm eval``).
- :mod:`fsm.sandbox.evaluate`: run a suite's cases k times each on fresh resources and
  report pass^k (and pass^k under policy).
- :mod:`fsm.sandbox.shadow`: replay recorded conversations of any agent through a
  workflow's gate (``fsm shadow``), read by :mod:`~fsm.sandbox.shadow_read`, their prose
  judged by :mod:`~fsm.sandbox.shadow_rules`, reported by
  :mod:`~fsm.sandbox.shadow_report`.
- :mod:`fsm.sandbox.infer`: the events an agent that speaks plain tool calling never
  fires, inferred (``fsm shadow``, ``fsm eval --infer-events``).
"""

from __future__ import annotations

from fsm.sandbox.evaluate import EvalReport, evaluate, pass_hat_k
from fsm.sandbox.replay import ReplayReport, replay
from fsm.sandbox.suite import Case, Expected, Suite, load_suite, suite_from_runs

__all__ = ["Case", "EvalReport", "Expected", "ReplayReport", "Suite", "evaluate",
           "load_suite", "pass_hat_k", "replay", "suite_from_runs"]
