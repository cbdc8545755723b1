"""``fsm shadow --live``: the calls the gate admits run on a fresh copy of the workflow's
own environment, and each conversation's final state is compared with the expected one.

The replay is :mod:`fsm.sandbox.shadow`'s, with one difference: instead of answering each
call with its recorded result, the workflow's own tools run, on an environment made fresh
for the conversation. A call the gate refuses never runs. The recorded results still feed
the prose rules (what the recorded agent had read when it proposed).

A workflow offers a live environment by declaring a ``LIVE`` object next to it in its
module (``workflows.retail.LIVE`` for ``retail``), as it declares its prose rules with
``SHADOW`` (:func:`fsm.sandbox.shadow_rules.rules_for`): a :class:`LiveEnvironment`. A
workflow without one cannot run with ``--live``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fsm.definition.spec import WorkflowSpec
from fsm.sandbox.shadow import Outcome, replay_one
from fsm.sandbox.shadow_read import Recorded, read_file
from fsm.sandbox.shadow_report import ShadowReport, outcome_class
from fsm.sandbox.shadow_rules import ProseRules

__all__ = ["LiveCopy", "LiveEnvironment", "LiveResult", "live_files", "live_for",
           "live_markdown", "live_rows", "live_summary"]


@dataclass
class LiveResult:
    """A conversation's final state beside the expected one."""

    #: Whether they are the same; ``None`` when there is nothing to compare with.
    matched: bool | None
    #: What the final state was compared with, or why it was not.
    expected: str
    #: What differs, one line each (the final value, then the expected one).
    differences: list[str] = field(default_factory=list)
    #: The writes that ran on the copy (tool and arguments), in order.
    writes_run: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class LiveCopy(Protocol):
    """One fresh environment, for one conversation."""

    #: The workflow built on it: its tools run on this copy only.
    spec: WorkflowSpec

    def compare(self) -> LiveResult:
        """The copy's final state beside the one expected for the conversation."""
        ...


class LiveEnvironment(Protocol):
    """What a workflow declares as ``LIVE`` to run ``fsm shadow --live``."""

    #: What the copy is and what it is compared with, in a sentence, for the report.
    summary: str

    def fresh(self, rec: Recorded) -> LiveCopy:
        """A fresh copy of the environment for ``rec``."""
        ...


def live_for(ref: str) -> LiveEnvironment | None:
    """The live environment the workflow ``ref`` declares (``LIVE`` next to it in its
    module), or ``None``."""
    import importlib

    from fsm.definition.registry import registered

    target = registered().get(ref, ref)
    if ":" not in target:
        return None
    try:
        module = importlib.import_module(target.split(":")[0])
    except ImportError:
        return None
    found: LiveEnvironment | None = getattr(module, "LIVE", None)
    return found


def replay_live(spec: WorkflowSpec, conversations: Sequence[Recorded], rules: ProseRules,
                env: LiveEnvironment) -> list[Outcome]:
    """Replay each conversation with its calls run on a fresh copy of ``env``."""
    out = []
    for rec in conversations:
        if rec.unreadable is not None:
            out.append(replay_one(spec, rec, rules))
            continue
        copy = env.fresh(rec)
        outcome = replay_one(spec, rec, rules, live=copy.spec)
        outcome.live = copy.compare().as_json()
        out.append(outcome)
    return out


def live_files(spec: WorkflowSpec, workflow: str, paths: Sequence[str], rules: ProseRules,
               env: LiveEnvironment) -> ShadowReport:
    """:func:`fsm.sandbox.shadow_report.shadow_files`, live."""
    read = [(Path(p).name, read_file(p)) for p in paths]
    report = ShadowReport(workflow, rules.summary)
    for name, conversations in read:
        started = time.perf_counter()
        report.files[name] = replay_live(spec, conversations, rules, env)
        report.seconds[name] = time.perf_counter() - started
    return report


def _state(o: Outcome) -> str:
    if o.live is None:
        return "not run"
    matched = o.live["matched"]
    return "no expected" if matched is None else ("matched" if matched else "differs")


def live_summary(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """How many final states match the expected ones, overall and by τ²-bench's verdict
    and fsm's."""
    by = Counter(_state(o) for o in outcomes)
    return {
        "conversations": len(outcomes), "compared": by["matched"] + by["differs"],
        "matched": by["matched"], "differs": by["differs"],
        "no_expected": by["no expected"], "not_run": by["not run"],
        "matched_by_tau2": dict(Counter(outcome_class(o.reward) for o in outcomes
                                        if _state(o) == "matched")),
        "matched_by_verdict": dict(Counter(o.verdict for o in outcomes
                                           if _state(o) == "matched")),
    }


def live_rows(report: ShadowReport) -> list[list[Any]]:
    """The report's terminal rows, each with its final state beside the expected one."""
    return [[*row, _state(o)] for row, o in zip(report.rows(), report.all(), strict=True)]


def live_markdown(report: ShadowReport, env: LiveEnvironment) -> list[str]:
    """The live section of the Markdown report."""
    s = live_summary(report.all())
    lines = ["## The final databases (--live)", "", env.summary, "",
             f"**{s['matched']} of {s['compared']}** final states compared match the "
             f"expected one ({s['no_expected']} without an expected one, {s['not_run']} "
             "not run).", "", "| task | trial | τ²-bench | verdict | final state | what "
             "differs |", "|---|---:|---|---|---|---|"]
    for o in report.all():
        diff = "; ".join((o.live or {}).get("differences", [])[:3])
        lines.append(f"| {o.task_id or ''} | {'' if o.trial is None else o.trial} | "
                     f"{outcome_class(o.reward)} | {o.verdict} | {_state(o)} | "
                     f"{diff.replace('|', chr(92) + '|')} |")
    return [*lines, ""]
