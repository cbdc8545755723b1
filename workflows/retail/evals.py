"""τ²-bench's retail tasks as an evaluation suite (``fsm eval retail-tau2``).

Each task is a case: the customer's reason for calling is the goal; the case's own policy
is the scripted desk that carries out the task's reference actions the way the desk's
policy requires (:func:`workflows.retail.replay.plan`), and the customer says yes to the
writes the task wants and no to any other; the case passes when the conversation ends
``done`` (``handed_over`` for a task whose reference transfers the customer to a person)
and the retail database equals τ²-bench's expected database for the task (its reference
actions applied to a fresh database, hashed as τ²-bench hashes it).
"""

from __future__ import annotations

from typing import Any

from fsm.sandbox.suite import Case, Expected, Suite
from workflows.retail import data
from workflows.retail.replay import Customer, Desk, expected_hash, plan, reference


def goal(task: dict[str, Any]) -> str:
    return str(task["user_scenario"]["instructions"].get("reason_for_call") or "Hello")


def _case(task: dict[str, Any]) -> Case:
    moves = plan(task)
    wanted = expected_hash(task)

    def same_database(resources: Any, run: Any) -> str | None:
        found = resources.get("retail").hash()
        return None if found == wanted else (
            f"the retail database differs from tau2-bench's expected one ({found[:12]}, "
            f"expected {wanted[:12]})")

    transfers = any(a.get("name") == "transfer_to_human_agents" for a in reference(task))
    return Case(name=f"task {task['id']}", goal=goal(task), user="customer",
                expect=Expected(status="handed_over" if transfers else "done",
                                predicate="the tau2-bench expected database"),
                policy=lambda: Desk(moves), customer=lambda: Customer(moves),
                predicate=same_database)


def tau2_suite() -> Suite:
    """Every retail task of τ²-bench, one case each."""
    cases = [_case(t) for t in data.tasks()]
    return Suite(name="retail-tau2", workflow="retail", cases=cases)
