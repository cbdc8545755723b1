"""Evaluation suites: cases read from a YAML file, checked strictly, or built from runs.

The format is in ``docs/reference/eval-suites.md``. Reading is strict: an unknown key, a
missing goal, a case without an expected outcome or a value of the wrong kind is one
line naming the file, the line and what is allowed — every such problem, and nothing
runs (:class:`~fsm.errors.SuiteError`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from fsm.errors import SuiteError
from fsm.policy import PolicyFn
from fsm.records import FINAL_STATUSES, STATUSES
from fsm.store.roles import Outcomes, RunReads

__all__ = ["Case", "Expected", "Suite", "WriteWanted", "load_suite", "skipped_line",
           "suite_from_runs", "suite_yaml"]

SUITE_KEYS = ("workflow", "policy", "k", "max_steps", "cases")
CASE_KEYS = ("name", "goal", "user", "replies", "decisions", "expect")
EXPECT_KEYS = ("status", "writes", "refusals", "check")
WRITE_KEYS = ("tool", "args")
DECISIONS = ("approve", "deny")


@dataclass(frozen=True)
class WriteWanted:
    """A write the case must make: its tool, and the arguments it must have (those
    given; others may be anything)."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    #: Where the suite file gives it (0: not from a file).
    line: int = field(default=0, compare=False)

    def matches(self, tool: str, args: dict[str, Any]) -> bool:
        return tool == self.tool and all(args.get(k) == v for k, v in self.args.items())


@dataclass
class Expected:
    """What a trial's outcome must be; ``None``: not checked."""

    status: str | None = None
    #: Every write the run made, in order (``[]``: none).
    writes: list[WriteWanted] | None = None
    #: At most this many refused attempts (the tables, guards or checks said no).
    refusals: int | None = None
    #: ``module:attr`` of ``fn(resources, run) -> bool | str | None`` (``False`` or a
    #: text: failed, the text saying why).
    check: str | None = None
    #: A text for the report: what ``predicate`` of a Python-built case checks.
    predicate: str | None = None


@dataclass
class Case:
    """One case: a goal, what the people in it answer, and what must come out."""

    name: str
    goal: str
    expect: Expected
    user: str = ""
    #: The customer's replies, in order (conversational workflows).
    replies: list[str] = field(default_factory=list)
    #: A person's decisions, in order, whenever the run waits for one.
    decisions: list[str] = field(default_factory=list)
    line: int = 0
    #: A Python-built suite's own policy for this case (made fresh for each trial).
    policy: Callable[[], PolicyFn] | None = None
    #: A Python-built suite's customer: ``fn(request) -> reply`` (instead of ``replies``).
    customer: Callable[[], Callable[[Any], str]] | None = None
    #: A Python-built suite's own predicate, ``fn(resources, run) -> None | str``.
    predicate: Callable[[Any, Any], str | None] | None = None


@dataclass
class Suite:
    name: str
    workflow: str
    cases: list[Case]
    policy: str | None = None
    k: int = 1
    max_steps: int | None = None
    #: Stored runs a suite built from runs left out, by why (:data:`SKIPPED`): run ids.
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def skipped_line(self) -> str:
        """:func:`skipped_line` of the runs this suite was built from."""
        matched = len(self.cases) + sum(map(len, self.skipped.values()))
        return skipped_line(self.skipped, matched)


#: Why :func:`suite_from_runs` leaves a run out, and how the one line says it.
SKIPPED = {
    "forks": ("fork", "forks", "a case starts from the goal, not from a parent's step"),
    "unfinished": ("not finished", "not finished", "no outcome yet"),
}


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[str] = []
        self._loader = yaml.SafeLoader("")

    def fail(self, node: yaml.Node, text: str) -> None:
        self.problems.append(f"{self.path}:{_line(node)}: {text}")

    def value(self, node: yaml.Node) -> Any:
        return self._loader.construct_object(node, deep=True)

    def mapping(self, node: yaml.Node, where: str, allowed: tuple[str, ...]
                ) -> dict[str, yaml.Node] | None:
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{where} must be a mapping of {', '.join(allowed)}")
            return None
        out: dict[str, yaml.Node] = {}
        for key, value in node.value:
            name = self.value(key)
            if name not in allowed:
                self.fail(key, f"{where}: unknown key {name!r} (allowed: {', '.join(allowed)})")
            elif name in out:
                self.fail(key, f"{where}: {name!r} is given twice")
            else:
                out[name] = value
        return out

    def text(self, nodes: dict[str, yaml.Node], key: str, where: str, *,
             required: bool = False) -> str | None:
        node = nodes.get(key)
        if node is None:
            return None
        value = self.value(node)
        if not isinstance(value, str) or (required and not value.strip()):
            self.fail(node, f"{where}: {key} must be a non-empty text")
            return None
        return value

    def texts(self, nodes: dict[str, yaml.Node], key: str, where: str) -> list[str]:
        node = nodes.get(key)
        if node is None:
            return []
        value = self.value(node)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(node, f"{where}: {key} must be a list of texts")
            return []
        return value

    def count(self, nodes: dict[str, yaml.Node], key: str, where: str, low: int) -> int | None:
        node = nodes.get(key)
        if node is None:
            return None
        value = self.value(node)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            self.fail(node, f"{where}: {key} must be a whole number of at least {low}")
            return None
        return value


def load_suite(path: str) -> Suite:
    """The suite in the YAML file ``path``; :class:`SuiteError` listing every problem
    (one line each, with its line number)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise SuiteError(f"cannot read suite {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SuiteError(f"suite {path!r} is not UTF-8 text") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SuiteError(f"{path}{where}: not YAML: {problem}") from None
    if root is None:
        raise SuiteError(f"{path}: the suite is empty (it needs workflow: and cases:)")
    r = _Reader(path)
    suite = _suite(r, root, path)
    if r.problems:
        raise SuiteError("\n".join(r.problems))
    assert suite is not None
    return suite


def _suite(r: _Reader, root: yaml.Node, path: str) -> Suite | None:
    top = r.mapping(root, "the suite", SUITE_KEYS)
    if top is None:
        return None
    workflow = r.text(top, "workflow", "the suite", required=True)
    if "workflow" not in top:
        r.fail(root, "the suite: workflow is missing (the registered name or module:attr)")
    k = r.count(top, "k", "the suite", 1)
    max_steps = r.count(top, "max_steps", "the suite", 1)
    cases: list[Case] = []
    node = top.get("cases")
    if node is None or not isinstance(node, yaml.SequenceNode) or not node.value:
        r.fail(node or root, "the suite: cases must be a list of at least one case")
    else:
        for i, item in enumerate(node.value, start=1):
            case = _case(r, item, i)
            if case is not None:
                cases.append(case)
    names = [c.name for c in cases]
    for c in cases:
        if names.count(c.name) > 1:
            r.problems.append(f"{path}:{c.line}: case {c.name!r}: two cases have this name")
            break
    return Suite(name=path, workflow=workflow or "", cases=cases,
                 policy=r.text(top, "policy", "the suite", required=True), k=k or 1,
                 max_steps=max_steps)


def _case(r: _Reader, node: yaml.Node, i: int) -> Case | None:
    named = [r.value(v) for k, v in getattr(node, "value", ())
             if isinstance(node, yaml.MappingNode) and r.value(k) == "name"]
    where = f"case {i} ({named[0]!r})" if named and isinstance(named[0], str) else f"case {i}"
    nodes = r.mapping(node, where, CASE_KEYS)
    if nodes is None:
        return None
    name = r.text(nodes, "name", where, required=True) or f"case {i}"
    goal = r.text(nodes, "goal", where, required=True)
    if "goal" not in nodes:
        r.fail(node, f"{where}: goal is missing (the request the run starts with)")
    decisions = r.texts(nodes, "decisions", where)
    for d in decisions:
        if d not in DECISIONS:
            r.fail(nodes["decisions"], f"{where}: decision {d!r} is not one of "
                                       f"{', '.join(DECISIONS)}")
    expect = _expect(r, nodes.get("expect"), node, where)
    if goal is None or expect is None:
        return None
    return Case(name=name, goal=goal, expect=expect,
                user=r.text(nodes, "user", where) or "",
                replies=r.texts(nodes, "replies", where), decisions=decisions,
                line=_line(node))


def _expect(r: _Reader, node: yaml.Node | None, case: yaml.Node, where: str
            ) -> Expected | None:
    if node is None:
        r.fail(case, f"{where}: no expected outcome (give expect: with status, writes, "
                     "refusals or check)")
        return None
    nodes = r.mapping(node, f"{where}: expect", EXPECT_KEYS)
    if nodes is None:
        return None
    if not nodes:
        r.fail(node, f"{where}: expect is empty (give status, writes, refusals or check)")
        return None
    status = r.text(nodes, "status", f"{where}: expect", required=True)
    if status is not None and status not in STATUSES:
        r.fail(nodes["status"], f"{where}: status {status!r} is not a run status (allowed: "
                                f"{', '.join(STATUSES)})")
    check = r.text(nodes, "check", f"{where}: expect", required=True)
    if check is not None and ":" not in check:
        r.fail(nodes["check"], f"{where}: check must be module:attr, not {check!r}")
    return Expected(status=status, writes=_writes(r, nodes.get("writes"), where),
                    refusals=r.count(nodes, "refusals", f"{where}: expect", 0), check=check)


def _writes(r: _Reader, node: yaml.Node | None, where: str) -> list[WriteWanted] | None:
    if node is None:
        return None
    if not isinstance(node, yaml.SequenceNode):
        r.fail(node, f"{where}: writes must be a list of {{tool, args}} (or [] for none)")
        return None
    out = []
    for item in node.value:
        nodes = r.mapping(item, f"{where}: a write", WRITE_KEYS)
        if nodes is None:
            continue
        tool = r.text(nodes, "tool", f"{where}: a write", required=True)
        if tool is None:
            r.fail(item, f"{where}: a write needs its tool")
            continue
        args = r.value(nodes["args"]) if "args" in nodes else {}
        if not isinstance(args, dict):
            r.fail(nodes["args"], f"{where}: the args of a write must be a mapping")
            continue
        out.append(WriteWanted(tool, args, line=_line(item)))
    return out


# -- from stored runs ---------------------------------------------------------------------

def suite_from_runs(store: Outcomes, *, workflow: str | None = None, status: str | None = None,
                    since: float | None = None, name: str = "from-runs") -> Suite:
    """A suite with one case per stored run (filtered) that finished and is no fork,
    expecting what happened: its final status, its writes with their arguments, and its
    number of refused attempts. The runs left out are in the suite's ``skipped``."""
    if status is not None and status not in FINAL_STATUSES:
        raise SuiteError(f"--status {status!r}: a suite is built from runs that finished "
                         f"(allowed: {', '.join(s for s in STATUSES if s in FINAL_STATUSES)})")
    matched = [r for r in store.list_runs(status, workflow=workflow)
               if since is None or r.created_at >= since]
    left_out: dict[str, list[str]] = {k: [] for k in SKIPPED}
    runs = []
    for r in matched:
        why = "forks" if r.forked_from is not None else \
            "unfinished" if r.status not in FINAL_STATUSES else None
        if why is None:
            runs.append(r)
        else:
            left_out[why].append(r.run_id)
    skipped = {k: v for k, v in left_out.items() if v}
    if not matched:
        raise SuiteError("no stored run matches" + "".join(
            f" {k} {v!r}" for k, v in (("--workflow", workflow), ("--status", status))
            if v) + (" since the time given" if since is not None else ""))
    if not runs:
        raise SuiteError(f"no stored run can be a case: {skipped_line(skipped, len(matched))}")
    workflows = sorted({r.workflow for r in runs})
    if len(workflows) > 1:
        raise SuiteError(f"the runs matched are of {len(workflows)} workflows "
                         f"({', '.join(workflows)}); give --workflow")
    cases = [_case_of(store, r.run_id) for r in runs]
    return Suite(name=name, workflow=_ref(store, runs[0].run_id), cases=cases,
                 skipped=skipped)


def skipped_line(skipped: dict[str, list[str]], matched: int, shown: int = 5) -> str:
    """One line: how many runs were left out of a suite built from runs, and why."""
    parts = []
    for key, run_ids in skipped.items():
        one, many, why = SKIPPED[key]
        more = f", … {len(run_ids) - shown} more" if len(run_ids) > shown else ""
        parts.append(f"{len(run_ids)} {one if len(run_ids) == 1 else many} "
                     f"({', '.join(run_ids[:shown])}{more}: {why})")
    return f"skipped {sum(map(len, skipped.values()))} of {matched} runs: {'; '.join(parts)}"


def _ref(store: RunReads, run_id: str) -> str:
    from fsm.records import started_as

    return started_as(store.events(run_id), store.load_run(run_id).workflow)


def _case_of(store: Outcomes, run_id: str) -> Case:
    run = store.load_run(run_id)
    messages = store.messages(run_id, 0, 1)
    writes = [WriteWanted(e.tool, dict(e.args)) for e in sorted(
        store.effects(run_id), key=lambda e: e.step) if e.status == "DONE" and not e.error]
    approvals = sorted(store.approvals(run_id, pending_only=False),
                       key=lambda a: (a.requested_at, a.approval_id))
    decisions = ["approve" if a.decision == "approved" else "deny" for a in approvals
                 if a.decision in ("approved", "denied")]
    refused = sum(1 for e in store.events(run_id) if e.kind == "refusal")
    return Case(name=run_id, goal=str(messages[0].get("content", "")) if messages else "",
                user=run.user, replies=[r.text for r in store.replies(run_id)],
                decisions=decisions,
                expect=Expected(status=run.status, writes=writes, refusals=refused))


def suite_yaml(suite: Suite) -> str:
    """The suite as a YAML file that :func:`load_suite` reads back."""
    cases = []
    for c in suite.cases:
        expect: dict[str, Any] = {}
        if c.expect.status is not None:
            expect["status"] = c.expect.status
        if c.expect.writes is not None:
            expect["writes"] = [{"tool": w.tool, "args": w.args} for w in c.expect.writes]
        if c.expect.refusals is not None:
            expect["refusals"] = c.expect.refusals
        if c.expect.check is not None:
            expect["check"] = c.expect.check
        case: dict[str, Any] = {"name": c.name, "goal": c.goal}
        if c.user:
            case["user"] = c.user
        if c.replies:
            case["replies"] = c.replies
        if c.decisions:
            case["decisions"] = c.decisions
        case["expect"] = expect
        cases.append(case)
    when = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
    head = f"# built by fsm eval --from-runs at {when}\n"
    if suite.skipped:
        head += f"# {suite.skipped_line()}\n"
    return head + yaml.safe_dump({"workflow": suite.workflow, "cases": cases},
                                 sort_keys=False, allow_unicode=True)
