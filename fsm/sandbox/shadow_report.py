"""The report of ``fsm shadow``: per conversation, and a summary per file and overall.

The summary holds τ²-bench's pass/fail against the verdicts (a conversation *passed* when
its reward is 1.0, *failed* when it is another number, *unscored* when it has none), the
refusals by rule, every refusal in a passing conversation (each to be classified as a
latent violation or a false refusal in a reviewed file), the writes refused in failing
conversations (refused before they happened), and each unmappable or unreadable
conversation with its reason. It renders as JSON, Markdown and terminal rows.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsm.definition.spec import WorkflowSpec
from fsm.sandbox.shadow import Outcome, replay_recorded
from fsm.sandbox.shadow_read import read_file
from fsm.sandbox.shadow_rules import ProseRules

__all__ = ["VERDICTS", "ShadowReport", "outcome_class", "shadow_files", "summarize"]

VERDICTS = ("admitted", "refused", "unmappable", "unreadable")
OUTCOMES = ("passed", "failed", "unscored")


def outcome_class(reward: float | None) -> str:
    """τ²-bench's verdict on a conversation: ``passed`` (reward 1.0), ``failed`` or
    ``unscored``."""
    if reward is None:
        return "unscored"
    return "passed" if reward == 1.0 else "failed"


def _writes(spec: WorkflowSpec) -> frozenset[str]:
    return frozenset(n for n, t in spec.tools.items() if t.write)


def summarize(outcomes: Sequence[Outcome], spec: WorkflowSpec, seconds: float
              ) -> dict[str, Any]:
    """The summary of ``outcomes`` (see the module's docstring)."""
    matrix = {o: dict.fromkeys(VERDICTS, 0) for o in OUTCOMES}
    for c in outcomes:
        matrix[outcome_class(c.reward)][c.verdict] += 1
    by_rule = Counter(c.refusal.rule for c in outcomes if c.refusal is not None)
    writes = _writes(spec)
    failed_writes = Counter(r.rule for c in outcomes if outcome_class(c.reward) == "failed"
                            for r in c.refusals if r.tool in writes)
    n = len(outcomes)
    return {
        "conversations": n,
        "verdicts": {v: sum(c.verdict == v for c in outcomes) for v in VERDICTS},
        "matrix": matrix,
        "refusals_by_rule": dict(by_rule.most_common()),
        "refused_in_passed": [_refused(c) for c in outcomes
                              if c.refusal is not None and outcome_class(c.reward) == "passed"],
        "writes_refused_in_failed": dict(failed_writes.most_common()),
        "unmapped": [{"simulation_id": c.simulation_id, "task_id": c.task_id,
                      "verdict": c.verdict, "reason": c.reason}
                     for c in outcomes if c.verdict in ("unmappable", "unreadable")],
        "admitted_writes": sum(len(c.writes) for c in outcomes),
        "writes_covered_by_a_shared_yes": _shared(outcomes),
        "conversations_with_a_shared_yes": sum(1 for c in outcomes if _shared([c])),
        "seconds": round(seconds, 3),
        "conversations_per_second": round(n / seconds, 1) if seconds > 0 else None,
    }


def _refused(c: Outcome) -> dict[str, Any]:
    r = c.refusal
    assert r is not None
    return {"simulation_id": c.simulation_id, "task_id": c.task_id, "trial": c.trial,
            "turn": r.turn, "tool": r.tool, "state": r.state, "rule": r.rule,
            "reason": r.reason}


def _shared(outcomes: Sequence[Outcome]) -> int:
    """Admitted writes whose yes also confirmed another write."""
    count = 0
    for c in outcomes:
        answers = Counter(w["answer_turn"] for w in c.writes)
        count += sum(1 for w in c.writes if answers[w["answer_turn"]] > 1)
    return count


@dataclass
class ShadowReport:
    """The outcomes of one ``fsm shadow`` run, file by file."""

    workflow: str
    rules: str
    #: source file name -> its outcomes, in the order given.
    files: dict[str, list[Outcome]] = field(default_factory=dict)
    #: source file name -> seconds spent replaying it.
    seconds: dict[str, float] = field(default_factory=dict)

    def all(self) -> list[Outcome]:
        return [o for outs in self.files.values() for o in outs]

    def as_json(self, spec: WorkflowSpec) -> dict[str, Any]:
        return {
            "workflow": self.workflow, "rules": self.rules,
            "files": {name: summarize(outs, spec, self.seconds[name])
                      for name, outs in self.files.items()},
            "summary": summarize(self.all(), spec, sum(self.seconds.values())),
            "conversations": [o.as_json() for o in self.all()],
        }

    def markdown(self, spec: WorkflowSpec, *, title: str | None = None,
                 level: int = 1) -> str:
        """The report in Markdown, its title a heading of ``level``."""
        h = "#" * level
        lines = [f"{h} {title or 'fsm shadow: ' + self.workflow}", "",
                 f"Workflow `{self.workflow}`. Prose rules: {self.rules}.", ""]
        if len(self.files) > 1:
            total = summarize(self.all(), spec, sum(self.seconds.values()))
            lines += [f"{h}# All files", "", f"{total['conversations']} conversations.", "",
                      *matrix_markdown(total), ""]
        for name, outs in self.files.items():
            lines += _file_markdown(name, summarize(outs, spec, self.seconds[name]), h + "#")
        return "\n".join(lines).rstrip() + "\n"

    def rows(self) -> list[list[Any]]:
        """One terminal row per conversation."""
        out = []
        for o in self.all():
            r = o.refusal
            out.append([o.source, o.task_id or "", "" if o.trial is None else o.trial,
                        "" if o.reward is None else o.reward, o.verdict,
                        "" if r is None else f"turn {r.turn} {r.tool}",
                        (r.rule if r is not None else o.reason or "")])
        return out


def matrix_markdown(summary: dict[str, Any]) -> list[str]:
    lines = ["| τ²-bench | " + " | ".join(VERDICTS) + " | total |",
             "|---|" + "---:|" * (len(VERDICTS) + 1)]
    for outcome in OUTCOMES:
        row = summary["matrix"][outcome]
        if not sum(row.values()) and outcome == "unscored":
            continue
        lines.append(f"| {outcome} | " + " | ".join(str(row[v]) for v in VERDICTS)
                     + f" | {sum(row.values())} |")
    return lines


def _file_markdown(name: str, s: dict[str, Any], h: str) -> list[str]:
    lines = [f"{h} `{name}`", "",
             f"{s['conversations']} conversations in {s['seconds']} s "
             f"({s['conversations_per_second']} per second); {s['admitted_writes']} writes "
             f"admitted, {s['writes_covered_by_a_shared_yes']} of them on a yes that "
             f"covered several (in {s['conversations_with_a_shared_yes']} conversations).",
             "", *matrix_markdown(s), "", f"{h}# Refusals by rule", ""]
    lines += [f"- {n} × {rule}" for rule, n in s["refusals_by_rule"].items()] or ["- none"]
    lines += ["", f"{h}# Refusals in conversations τ²-bench passed", ""]
    if s["refused_in_passed"]:
        lines += ["| task | turn | call | state | rule | reason |", "|---|---:|---|---|---|---|"]
        lines += [f"| {r['task_id']} | {r['turn']} | `{r['tool']}` | {r['state']} | "
                  f"{_cell(r['rule'])} | {_cell(r['reason'])} |" for r in s["refused_in_passed"]]
    else:
        lines.append("None.")
    lines += ["", f"{h}# Writes refused in conversations τ²-bench failed", ""]
    lines += [f"- {n} × {rule}" for rule, n in s["writes_refused_in_failed"].items()] or \
        ["- none"]
    lines += ["", f"{h}# Unmappable and unreadable", ""]
    lines += [f"- task {u['task_id']} (`{u['simulation_id']}`): {u['verdict']}: "
              f"{u['reason']}" for u in s["unmapped"]] or ["- none"]
    return [*lines, ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def shadow_files(spec: WorkflowSpec, workflow: str, paths: Sequence[str],
                 rules: ProseRules) -> ShadowReport:
    """Read and replay every file of ``paths`` (see :mod:`fsm.sandbox.shadow`); a file that
    is none of the shapes read raises :class:`~fsm.sandbox.shadow_read.UnreadableFile`
    before anything is replayed."""
    read = [(Path(p).name, read_file(p)) for p in paths]
    report = ShadowReport(workflow, rules.summary)
    for name, conversations in read:
        started = time.perf_counter()
        report.files[name] = replay_recorded(spec, conversations, rules)
        report.seconds[name] = time.perf_counter() - started
    return report
