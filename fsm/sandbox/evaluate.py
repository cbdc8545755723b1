"""``fsm eval``: each case of a suite k times, each trial on fresh resources, and pass^k.

A trial runs the real workflow — its tables, guards and tools — on a
:class:`~fsm.store.memory.MemoryStore` with the workflow's resources opened afresh at the
empty location (the workflows' in-memory resources: a seeded shop, the pinned retail
data), so nothing outside the process is touched. The person's decisions and the
customer's replies come from the case. A trial passes when its outcome is what the case
expects (see :mod:`fsm.sandbox.suite`).

pass^k is τ²-bench's: for a case with ``n`` trials of which ``c`` passed, the chance that
``k`` trials drawn from them all pass, ``C(c, k) / C(n, k)``, averaged over the cases.
pass^k *under policy* counts a trial only when it passed with no refused attempt in its
log: the outcome was right and the policy never tried what the workflow forbids.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fsm.definition.registry import load_object, load_policy
from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import Resources
from fsm.policy import PolicyFn
from fsm.records import RunState
from fsm.runtime.engine import Engine
from fsm.sandbox.suite import Case, Suite
from fsm.store.memory import MemoryStore

__all__ = ["CaseResult", "EvalReport", "Trial", "evaluate", "pass_hat_k"]


def pass_hat_k(num_trials: int, successes: int, k: int) -> float:
    """τ²-bench's pass^k of one case: ``C(successes, k) / C(num_trials, k)``."""
    if not 1 <= k <= num_trials:
        raise ValueError(f"pass^{k} needs at least {k} trials, not {num_trials}")
    return math.comb(successes, k) / math.comb(num_trials, k)


@dataclass
class Trial:
    passed: bool
    why: list[str]
    status: str
    steps: int
    tokens: int
    cost_micros: int
    refused: int
    writes: list[dict[str, Any]]

    @property
    def clean(self) -> bool:
        """Passed, with no refused attempt in its log (it counts under policy)."""
        return self.passed and self.refused == 0


@dataclass
class CaseResult:
    case: Case
    trials: list[Trial] = field(default_factory=list)

    @property
    def successes(self) -> int:
        return sum(t.passed for t in self.trials)

    def pass_hat(self, k: int) -> float:
        return pass_hat_k(len(self.trials), self.successes, k)

    def pass_hat_under_policy(self, k: int) -> float:
        """pass^k counting only the trials that passed with nothing refused."""
        return pass_hat_k(len(self.trials), sum(t.clean for t in self.trials), k)

    def as_json(self, k: int) -> dict[str, Any]:
        n = len(self.trials)
        return {
            "case": self.case.name, "trials": n, "passed": self.successes,
            f"pass^{k}": self.pass_hat(k),
            f"pass^{k} under policy": self.pass_hat_under_policy(k),
            "refused_per_run": sum(t.refused for t in self.trials) / n,
            "steps_per_run": sum(t.steps for t in self.trials) / n,
            "tokens": sum(t.tokens for t in self.trials),
            "cost_micros": sum(t.cost_micros for t in self.trials),
            "failures": sorted({w for t in self.trials for w in t.why}),
        }


@dataclass
class EvalReport:
    suite: str
    policy: str
    k: int
    cases: list[CaseResult]
    seconds: float = 0.0

    def pass_hat_ks(self) -> dict[int, float]:
        """pass^j for j from 1 to k, each averaged over the cases (as τ²-bench reports)."""
        return {j: sum(c.pass_hat(j) for c in self.cases) / len(self.cases)
                for j in range(1, self.k + 1)}

    def pass_hat_ks_under_policy(self) -> dict[int, float]:
        """The same, counting only the trials that passed with nothing refused."""
        return {j: sum(c.pass_hat_under_policy(j) for c in self.cases) / len(self.cases)
                for j in range(1, self.k + 1)}

    @property
    def ok(self) -> bool:
        """Every trial of every case passed (pass^k is 1)."""
        return all(c.successes == len(c.trials) for c in self.cases)

    def as_json(self) -> dict[str, Any]:
        trials = [t for c in self.cases for t in c.trials]
        return {
            "suite": self.suite, "policy": self.policy, "k": self.k, "ok": self.ok,
            "cases": [c.as_json(self.k) for c in self.cases],
            "overall": {
                "cases": len(self.cases), "trials": len(trials),
                "cases_passed": sum(c.successes == len(c.trials) for c in self.cases),
                **{f"pass^{j}": v for j, v in self.pass_hat_ks().items()},
                **{f"pass^{j} under policy": v
                   for j, v in self.pass_hat_ks_under_policy().items()},
                "refused_per_run": sum(t.refused for t in trials) / len(trials),
                "steps_per_run": sum(t.steps for t in trials) / len(trials),
                "tokens": sum(t.tokens for t in trials),
                "cost_micros": sum(t.cost_micros for t in trials),
            },
            "seconds": round(self.seconds, 3),
        }


def evaluate(spec: WorkflowSpec, suite: Suite, policy: Callable[[Case], PolicyFn], *,
             k: int, policy_name: str = "", clock: Any = time.time) -> EvalReport:
    """Run every case of ``suite`` ``k`` times; ``policy(case)`` makes a fresh policy for
    each trial."""
    started = time.perf_counter()
    results = []
    for case in suite.cases:
        result = CaseResult(case)
        for i in range(k):
            result.trials.append(_trial(spec, suite, case, policy(case), i + 1, clock))
        results.append(result)
    return EvalReport(suite.name, policy_name, k, results, time.perf_counter() - started)


def _trial(spec: WorkflowSpec, suite: Suite, case: Case, policy: PolicyFn, n: int,
           clock: Any) -> Trial:
    store = MemoryStore()
    resources = Resources(spec.resources, "")
    run_id = f"eval-{n}"
    try:
        with Engine(spec, store, policy, resources=resources, clock=clock) as engine:
            budgets = engine.budgets if suite.max_steps is None else \
                engine.budgets.model_copy(update={"max_steps": suite.max_steps})
            if spec.converses:
                run = engine.start_conversation(case.goal, user=case.user, run_id=run_id,
                                                budgets=budgets).run
            else:
                run = engine.start(case.goal, user=case.user, run_id=run_id, budgets=budgets)
            run = _answer(engine, case, run)
            return _judge(spec, store, resources, case, run)
    finally:
        resources.close()
        store.close()


def _answer(engine: Engine, case: Case, run: RunState) -> RunState:
    decisions = list(case.decisions)
    replies = list(case.replies)
    customer = case.customer() if case.customer is not None else None
    for _ in range(500):
        if run.status == "awaiting_approval" and decisions:
            run = engine.decide(run.run_id, decisions.pop(0) == "approve",
                                reviewer="eval-reviewer", note="from the suite")
        elif run.status == "awaiting_customer" and (replies or customer is not None):
            text = replies.pop(0) if replies else customer(run.pending)  # type: ignore[misc]
            run = engine.reply(run.run_id, text)
        else:
            break
    return run


def _judge(spec: WorkflowSpec, store: MemoryStore, resources: Resources, case: Case,
           run: RunState) -> Trial:
    want = case.expect
    why: list[str] = []
    done = [e for e in sorted(store.effects(run.run_id), key=lambda e: e.step)
            if e.status == "DONE" and not e.error]
    writes: list[dict[str, Any]] = [{"tool": e.tool, "args": e.args} for e in done]
    refused = sum(1 for e in store.events(run.run_id) if e.kind == "refusal")
    if want.status is not None and run.status != want.status:
        why.append(f"status {run.status}, expected {want.status}"
                   + (f" ({run.reason})" if run.reason else ""))
    if want.writes is not None:
        made = [(e.tool, e.args) for e in done]
        if len(made) != len(want.writes) or not all(
                w.matches(t, a) for w, (t, a) in zip(want.writes, made, strict=False)):
            why.append(f"writes {_shown(made)}, expected "
                       f"{_shown([(w.tool, w.args) for w in want.writes])}")
    if want.refusals is not None and refused > want.refusals:
        why.append(f"{refused} refused attempts, expected at most {want.refusals}")
    if want.check is not None:
        problem = _check(want.check, resources, run)
        if problem is not None:
            why.append(problem)
    if case.predicate is not None:
        try:
            problem = case.predicate(resources, run)
        except Exception as exc:  # noqa: BLE001 - the suite's own code
            problem = f"{want.predicate or 'the case predicate'} raised {type(exc).__name__}: {exc}"
        if problem is not None:
            why.append(problem)
    used = run.used
    return Trial(not why, why, run.status, used.steps, used.input_tokens + used.output_tokens,
                 used.cost_micros, refused, writes)


def _shown(calls: list[tuple[str, dict[str, Any]]]) -> str:
    import json

    return "[" + ", ".join(f"{t} {json.dumps(a, sort_keys=True, ensure_ascii=False)}"
                           for t, a in calls) + "]" if calls else "none"


def _check(ref: str, resources: Resources, run: RunState) -> str | None:
    """``None`` when the case's predicate holds, else why not."""
    fn = load_object(ref)
    try:
        verdict = fn(resources, run)
    except Exception as exc:  # noqa: BLE001 - the suite's own code
        return f"check {ref} raised {type(exc).__name__}: {exc}"
    if verdict is None or verdict is True:
        return None
    return f"check {ref}: {verdict if isinstance(verdict, str) else 'failed'}"


def resolve_checks(suite: Suite, spec: WorkflowSpec | None = None) -> None:
    """Resolve the suite against its workflow before anything runs: import every case's
    check, and (given ``spec``) find every expected write among the workflow's write
    tools. Each that cannot be is one line of a :class:`~fsm.errors.SuiteError` naming
    the suite, the case and its line."""
    from fsm.errors import SuiteError

    problems = [*_check_problems(suite), *(_write_problems(suite, spec) if spec else [])]
    if problems:
        raise SuiteError("\n".join(problems))


def _check_problems(suite: Suite) -> list[str]:
    from fsm.errors import FSMError, SuiteError

    problems = []
    for case in suite.cases:
        if case.expect.check is None:
            continue
        try:
            found = load_object(case.expect.check)
            if not callable(found):
                raise SuiteError(f"{case.expect.check} is not a function")
        except (FSMError, SuiteError) as exc:
            problems.append(f"{suite.name}:{case.line}: case {case.name!r}: check: {exc}")
    return problems


def _write_problems(suite: Suite, spec: WorkflowSpec) -> list[str]:
    """An expected write whose tool the workflow lacks, or that is no write."""
    writes = sorted(name for name, t in spec.tools.items() if t.write)
    allowed = f"(its write tools: {', '.join(writes) or 'none'})"
    problems = []
    for case in suite.cases:
        for w in case.expect.writes or []:
            tool = spec.tools.get(w.tool)
            if tool is not None and tool.write:
                continue
            what = f"tool {w.tool!r} of workflow {spec.name!r} is not a write" if tool \
                else f"no tool {w.tool!r} in workflow {spec.name!r}"
            problems.append(f"{suite.name}:{w.line or case.line}: case {case.name!r}: "
                            f"expect.writes: {what} {allowed}")
    return problems


def policy_maker(ref: str | None, fallback: Callable[[], PolicyFn] | None
                 ) -> Callable[[Case], PolicyFn]:
    """Policies for the trials: ``ref`` (module:attr, loaded afresh for each trial, so a
    factory gives a new policy each time), else each case's own, else ``fallback``."""

    def make(case: Case) -> PolicyFn:
        if ref is not None:
            return load_policy(ref)  # type: ignore[no-any-return]
        if case.policy is not None:
            return case.policy()
        assert fallback is not None, "no policy for the suite"
        return fallback()

    return make
