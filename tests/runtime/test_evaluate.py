"""Evaluation in Python: ScriptedPolicy trials on fresh resources, and pass^k."""

from __future__ import annotations

from refund_scripts import actions, large_refund, small_refund

from fsm import evaluate
from fsm.definition.registry import load_workflow
from fsm.sandbox.evaluate import policy_maker
from fsm.sandbox.suite import Case, Expected, Suite, WriteWanted
from fsm.testing import ScriptedPolicy

KETTLE = Case(name="kettle", goal="Order A-1001: the kettle arrived broken", user="asha",
              expect=Expected(status="done", refusals=0, writes=[
                  WriteWanted("refund_item", {"order_id": "A-1001", "amount_paise": 35_000}),
                  WriteWanted("send_reply")],
                  check="workflows.refund.evals:paid_at_most_once"))
HEADPHONES = Case(name="headphones", goal="Order A-1002: headphones dead", user="ravi",
                  decisions=["approve"], expect=Expected(status="done", writes=[
                      WriteWanted("refund_item", {"amount_paise": 180_000}),
                      WriteWanted("send_reply")]))


def _run(script: list, *cases: Case, k: int = 3):
    suite = Suite(name="s", workflow="refund", cases=list(cases))
    return evaluate(load_workflow("refund"), suite,
                    policy_maker(None, lambda: ScriptedPolicy(actions(script))), k=k)


def test_each_trial_starts_on_fresh_resources() -> None:
    report = _run(small_refund(), KETTLE)
    # Had the shop been shared, the second trial's refund would be refused as done before.
    assert report.ok and report.pass_hat_ks() == {1: 1.0, 2: 1.0, 3: 1.0}
    assert [t.writes[0]["args"]["item_id"] for t in report.cases[0].trials] == ["kettle-1"] * 3


def test_a_person_decides_when_the_run_waits() -> None:
    assert _run(large_refund(), HEADPHONES, k=1).ok


def test_scripted_policies_that_differ_on_purpose_are_caught() -> None:
    twice = [*small_refund()[:6], small_refund()[5], small_refund()[6]]
    report = _run(twice, KETTLE, k=2)
    trial = report.cases[0].trials[0]
    assert not report.ok and trial.refused == 1
    assert trial.why == ["1 refused attempts, expected at most 0"]
    skipped = [s for s in small_refund() if s[0] != "get_policy"]
    report = _run(skipped, KETTLE, k=2)
    assert not report.ok and report.pass_hat_ks()[2] == 0.0
    assert report.cases[0].trials[0].why[0].startswith("status ")


def test_pass_hat_k_under_policy_leaves_out_trials_with_a_refused_attempt() -> None:
    """A trial that reached the expected outcome after a refused attempt passes the case
    (it expects no refusal count) but does not count under policy."""
    lenient = Case(name="kettle", goal=KETTLE.goal, user="asha", expect=Expected(
        status="done", writes=KETTLE.expect.writes))
    twice = [*small_refund()[:6], small_refund()[5], small_refund()[6]]
    report = _run(twice, lenient, k=2)
    assert report.ok and [t.refused for t in report.cases[0].trials] == [1, 1]
    assert report.pass_hat_ks() == {1: 1.0, 2: 1.0}
    assert report.pass_hat_ks_under_policy() == {1: 0.0, 2: 0.0}
    overall = report.as_json()["overall"]
    assert (overall["pass^2"], overall["pass^2 under policy"]) == (1.0, 0.0)
    clean = _run(small_refund(), lenient, k=2)
    assert clean.pass_hat_ks_under_policy() == clean.pass_hat_ks() == {1: 1.0, 2: 1.0}
