"""The verifier: prove that forbidden sequences cannot happen, or show the shortest one.

A workflow declares its invariants next to its tables, in this vocabulary::

    INVARIANTS = (
        ToolOnlyIn("refund_item", "refunding"),
        OnlyThrough("refunding", "verified"),
        ToolOnlyAfter("refund_item", "approved", unless="amount_within_limit"),
        HumanOnly("approved", "declined", "expired"),
        FiredOnlyByTools("refund_ok", "refund_failed", "sent"),
        AlwaysReaches("done", "handed_over"),
        AtMostOnce("refund_ok"),
        NoReentryAfter("refunding", "refund_ok"),
    )

:func:`verify` explores every path of the machine from the initial state — the
edges of :func:`fsm.auditor.diagram.extract`, so exactly what the diagram shows: who may
fire each event, the facts each guard establishes, the tools of each state. Each
invariant is a small monitor run alongside the machine; a breadth-first search over
(state, monitor) pairs visits each pair once, so cycles end, and the first breaking
move it finds ends the shortest counterexample. A guard is assumed able to pass
or fail; a tool listed for a non-terminal state is assumed callable there.
"""


from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fsm.auditor.conversation_invariants import ConfirmedWrites, CustomerOnly, NothingAfter
from fsm.auditor.diagram import Diagram, extract
from fsm.auditor.facts import fact_warnings
from fsm.auditor.graph import Graph, Move
from fsm.auditor.invariants import (
    AlwaysReaches,
    AtMostOnce,
    FiredOnlyByTools,
    HumanOnly,
    Invariant,
    Monitored,
    NoReentryAfter,
    OnlyThrough,
    ToolOnlyAfter,
    ToolOnlyIn,
    ToolOnlyWith,
    Verdict,
)
from fsm.definition.checks import invariant_problems
from fsm.definition.spec import WorkflowSpec
from fsm.errors import InvariantError

__all__ = [
    "ASSUMPTIONS",
    "AlwaysReaches",
    "AtMostOnce",
    "ConfirmedWrites",
    "CustomerOnly",
    "FiredOnlyByTools",
    "HumanOnly",
    "Invariant",
    "InvariantError",
    "Monitored",
    "Move",
    "NoReentryAfter",
    "NothingAfter",
    "OnlyThrough",
    "Report",
    "ToolOnlyAfter",
    "ToolOnlyIn",
    "ToolOnlyWith",
    "Verdict",
    "check_names",
    "verify",
    "verify_from",
]


# -- running and reporting ---------------------------------------------------------------

def check_names(diagram: Diagram, invariants: Iterable[object]) -> None:
    """Raise :class:`InvariantError` listing every invariant that names something unknown."""
    known = {
        "states": {n.name for n in diagram.nodes}, "events": {e.event for e in diagram.edges},
        "tools": set(diagram.tools), "facts": set(diagram.facts),
    }
    chosen = invariants if isinstance(invariants, (list, tuple)) else tuple(invariants)
    problems = invariant_problems(chosen, known)
    problems += [f"invariants[{i}] is a {type(inv).__name__}, which has references() but "
                 "no check(graph): derive it from fsm.auditor.verify.Invariant"
                 for i, inv in enumerate(chosen)
                 if callable(getattr(inv, "references", None))
                 and not isinstance(inv, Invariant)]
    if problems:
        raise InvariantError(diagram.workflow, problems)


#: What the explorer assumes about a run, printed in every Markdown report.
ASSUMPTIONS = (
    "- the model may call any tool listed for a state, any number of times, and fire any "
    "event offered to it;",
    "- a tool's result may fire any event the tool declares, or none;",
    "- a person fires any event of a state that waits for a person (approve, deny, or one "
    "named with --event), and only there;",
    "- any guard may pass or fail; a guard that passes establishes the facts it declares "
    "(⇒), which hold for the rest of the path (for an `unless=` fact, until a later guard "
    "establishes facts: a new decision);",
    "- a condition no guard established is never assumed to hold.",
)

#: What the explorer assumes about conversations, added for a workflow that has them.
CUSTOMER_ASSUMPTIONS = (
    "- the customer's reply fires any customer event of a state where the customer is "
    "asked, and only there; a customer event is never fired by the model, a person or a "
    "tool;",
    "- a write bound to a proposal (confirmed_by) runs only while the customer's yes to that "
    "proposal is held, and uses it up; entering a state that waits for the customer on a "
    "new proposal, or a wait that expires, drops it;",
    "- a tool that always emits (always_emits) never leaves the run where it was when every "
    "event it declares leaves that state without a guard.",
)


@dataclass(frozen=True)
class Report:
    workflow: str
    definition_hash: str
    initial: str
    states: int
    moves: int
    verdicts: tuple[Verdict, ...]
    #: What the check found suspicious without failing on it (a guard reading a fact
    #: nothing sets: :func:`fsm.auditor.facts.fact_warnings`).
    warnings: tuple[str, ...] = ()
    #: The workflow talks with its customer (the report then says what it assumes of that).
    converses: bool = False

    @property
    def ok(self) -> bool:
        return all(v.proved for v in self.verdicts)

    @property
    def summary(self) -> str:
        bad = sum(not v.proved for v in self.verdicts)
        n = len(self.verdicts)
        if n == 0:
            return "no invariants declared: nothing was proved"
        return f"{n} invariants: {n - bad} proved, {bad} violated"

    def text(self) -> str:
        out = [f"Verification of workflow {self.workflow!r} (definition {self.definition_hash})",
               f"Explored every path from {self.initial!r}: {self.states} reachable states, "
               f"{self.moves} moves.", ""]
        for v in self.verdicts:
            out.append(f"{'PROVED' if v.proved else 'VIOLATED':<9} {_plain(v.invariant.title)}")
            if not v.proved:
                out.append(f"          {_plain(v.why)}")
                out.append(f"          shortest counterexample ({len(v.counterexample)} moves):")
                out += [f"            {i}. {mv.describe()}"
                        for i, mv in enumerate(v.counterexample, 1)]
        out += [f"WARNING   {w}" for w in self.warnings]
        return "\n".join(out + ["", self.summary + "."]) + "\n"

    def markdown(self) -> str:
        out = [f"# Verification of workflow `{self.workflow}`", "",
               f"Definition `{self.definition_hash}`. Generated by `fsm verify {self.workflow} "
               "--format md`; do not edit by hand.", "",
               f"Every path from `{self.initial}` was explored ({self.states} reachable states, "
               f"{self.moves} moves), with who may fire each event and the facts each guard "
               "establishes (see the workflow's diagram).", "", f"**{self.summary}.**", "",
               "| # | invariant | result |", "|---|---|---|"]
        for i, v in enumerate(self.verdicts, 1):
            out.append(f"| {i} | {v.invariant.title} | "
                       f"{'PROVED' if v.proved else '**VIOLATED**'} |")
        if self.warnings:
            out += ["", "Warnings:", "", *(f"- {w}" for w in self.warnings)]
        out += ["", "How the paths were explored:", "", *ASSUMPTIONS,
                *(CUSTOMER_ASSUMPTIONS if self.converses else ())]
        for i, v in enumerate(self.verdicts, 1):
            if v.proved:
                continue
            out += ["", f"## {i}. VIOLATED: {v.invariant.title}", "", f"{v.why}.", "",
                    f"Shortest counterexample ({len(v.counterexample)} moves):", ""]
            out += [f"{j}. {mv.describe(md=True)}" for j, mv in enumerate(v.counterexample, 1)]
        return "\n".join(out) + "\n"


def _plain(text: str) -> str:
    return text.replace("`", "")


def verify(spec: WorkflowSpec, invariants: Iterable[object] | None = None) -> Report:
    """Check ``invariants`` (default: ``spec.invariants``) against every path of ``spec``."""
    diagram = extract(spec)
    chosen = tuple(spec.invariants if invariants is None else invariants)
    check_names(diagram, chosen)
    graph = Graph(diagram)
    verdicts = tuple(inv.check(graph) for inv in chosen if isinstance(inv, Invariant))
    reached = graph.reachable()
    moves = sum(len(graph.moves[s]) for s in reached)
    return Report(spec.name, spec.definition_hash, spec.initial, len(reached), moves, verdicts,
                  tuple(fact_warnings(spec)), converses=diagram.converses)


def verify_from(spec: WorkflowSpec, state: str, history: Sequence[Move]) -> tuple[Verdict, ...]:
    """Check ``spec``'s invariants over every path on from ``state``, for a run whose path
    so far is ``history`` (its moves in ``spec``'s words): what a migration to ``spec``
    must prove before the run continues there."""
    diagram = extract(spec)
    check_names(diagram, spec.invariants)
    graph = Graph(diagram)
    return tuple(inv.check_from(graph, state, history) for inv in spec.invariants
                 if isinstance(inv, Invariant))
