"""fsm eval: suites run k times on fresh resources, pass^k, and policies caught out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_inproc import Cli, error_line
from fake_openai import FakeOpenAI, call
from refund_scripts import SMALL_REPLY, small_refund

from fsm.sandbox.evaluate import pass_hat_k

SUITE = Path(__file__).resolve().parents[2] / "workflows" / "refund" / "eval.yaml"
ONE_CASE = """\
workflow: refund
cases:
  - name: kettle
    goal: "Order A-1001: the kettle arrived broken"
    user: asha
    expect:
      status: done
      writes:
        - tool: refund_item
          args: {order_id: A-1001, amount_paise: 35000}
        - tool: send_reply
      refusals: 0
      check: workflows.refund.evals:paid_at_most_once
"""


def _json(cli: Cli, *args: str) -> tuple[int, dict]:
    out = cli("eval", *args, "--json")
    assert "Traceback" not in out.err, out.err
    return out.code, json.loads(out.out)


def test_pass_hat_k_is_tau2_benchs() -> None:
    assert pass_hat_k(4, 4, 4) == 1.0 and pass_hat_k(4, 3, 4) == 0.0
    assert pass_hat_k(4, 3, 1) == 0.75 and pass_hat_k(4, 3, 2) == 0.5  # C(3,2)/C(4,2)
    with pytest.raises(ValueError):
        pass_hat_k(2, 2, 3)


def test_the_refund_suite_of_21_cases_passes_with_the_clerk(cli: Cli) -> None:
    code, report = _json(cli, str(SUITE), "-k", "2")
    assert code == 0 and report["ok"]
    overall = report["overall"]
    assert overall["cases"] == 21 and overall["trials"] == 42 and overall["cases_passed"] == 21
    assert overall["pass^1"] == overall["pass^2"] == 1.0
    assert overall["pass^1 under policy"] == overall["pass^2 under policy"] == 1.0
    assert overall["refused_per_run"] == 0
    assert all(c["trials"] == 2 and c["pass^2"] == 1.0 for c in report["cases"])
    table = cli("eval", str(SUITE))
    assert table.code == 0 and "21 of 21 cases passed every trial" in table.out
    assert "pass^1 1.000 (1.000 under policy)" in table.out


def test_a_policy_that_pays_twice_and_one_that_skips_a_step_are_caught(cli: Cli) -> None:
    code, twice = _json(cli, str(SUITE), "--policy", "eval_policies:pays_twice")
    assert code == 1 and not twice["ok"]
    paid = {c["case"]: c for c in twice["cases"] if c["case"].endswith(("refunded",
                                                                        "after approval"))}
    assert len(paid) == 4
    for case in paid.values():
        assert case["pass^1"] == 0.0 and case["refused_per_run"] == 1.0
        assert case["failures"] == ["1 refused attempts, expected at most 0"]
    code, skips = _json(cli, str(SUITE), "--policy", "eval_policies:skips_policy")
    assert code == 1
    failed = [c for c in skips["cases"] if c["passed"] == 0]
    assert failed and all(any("status" in w for w in c["failures"]) for c in failed)
    assert skips["overall"]["pass^1"] < 1.0


def test_the_report_shows_the_expected_writes_as_they_are(cli: Cli, tmp_path: Path) -> None:
    suite = tmp_path / "one.yaml"
    suite.write_text(ONE_CASE)
    table = cli("eval", str(suite), "--policy", "eval_policies:skips_policy")
    assert table.code == 1, table
    assert 'writes none, expected [refund_item {"amount_paise": 35000, "order_id": ' \
           '"A-1001"}, send_reply {}]' in table.out, table.out


def test_a_model_behind_an_openai_compatible_server(cli: Cli, server: FakeOpenAI,
                                                    tmp_path: Path) -> None:
    suite = tmp_path / "one.yaml"
    suite.write_text(ONE_CASE)
    server.script(*[call(n, a, usage=(1000, 50)) for n, a in small_refund()] * 2)
    code, report = _json(cli, str(suite), "-k", "2", "--model", "gpt-4o-mini",
                         "--base-url", server.base_url)
    assert code == 0, report
    case = report["cases"][0]
    assert case["pass^2"] == 1.0 and case["tokens"] == 2 * 7 * 1050 and case["cost_micros"] > 0
    assert report["policy"] == "model:gpt-4o-mini"
    # A model that tries to refund again after paying: caught in one of the two trials.
    twice = [*small_refund()[:6], ("refund_item", small_refund()[5][1]),
             ("send_reply", {"text": SMALL_REPLY})]
    server.script(*[call(n, a) for n, a in small_refund()], *[call(n, a) for n, a in twice])
    code, report = _json(cli, str(suite), "-k", "2", "--model", "gpt-4o-mini",
                         "--base-url", server.base_url)
    case = report["cases"][0]
    assert code == 1 and case["passed"] == 1 and case["pass^2"] == 0.0
    assert report["overall"]["pass^1"] == 0.5 and case["refused_per_run"] == 0.5


def test_the_retail_desks_tau2_tasks_are_a_suite(cli: Cli) -> None:
    code, report = _json(cli, "retail-tau2")
    assert code == 0, [c for c in report["cases"] if c["failures"]][:3]
    assert report["overall"]["cases"] == 114 and report["overall"]["pass^1"] == 1.0


def test_a_suite_from_stored_runs_expects_what_happened(cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    assert cli("run", "refund", "Order A-1001: kettle broken", "--user", "asha",
               "--db", db).code == 0
    assert cli("run", "refund", "Order A-1004: lamp", "--user", "kiran", "--db", db).code == 5
    saved = tmp_path / "yesterday.yaml"
    code, report = _json(cli, "--from-runs", "--workflow", "refund", "--since", "1d",
                         "--save", str(saved), "--db", db)
    assert code == 0 and report["overall"]["cases"] == 2, report
    code, again = _json(cli, str(saved))
    assert code == 0 and again["overall"]["cases_passed"] == 2
    code, caught = _json(cli, str(saved), "--policy", "eval_policies:pays_twice")
    assert code == 1 and caught["overall"]["cases_passed"] == 1
    only = _json(cli, "--from-runs", "--status", "handed_over", "--db", db)[1]
    assert [c["case"] for c in only["cases"]] and only["overall"]["cases"] == 1


def test_a_suite_from_stored_runs_leaves_out_forks_and_runs_not_finished(
        cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    assert cli("run", "refund", "Order A-1001: kettle broken", "--user", "asha",
               "--run-id", "k1", "--db", db).code == 0
    assert cli("run", "refund", "Order A-1002: headphones dead", "--user", "ravi",
               "--run-id", "waits", "--db", db).code == 0  # awaiting_approval
    for run_id, at in (("k1-a", "3"), ("k1-b", "5")):
        assert cli("fork", "k1", "--at", at, "--run-id", run_id, "--db", db).code == 0
    assert cli("resume", "k1-b", "--db", db).code == 5  # a fork that finished: left out too
    table = cli("eval", "--from-runs", "--db", db)
    assert table.code == 0, table
    assert table.out.splitlines()[0] == (
        "skipped 3 of 4 runs: 2 forks (k1-a, k1-b: a case starts from the goal, not from a "
        "parent's step); 1 not finished (waits: no outcome yet)")
    assert "1 of 1 cases passed every trial" in table.out
    code, report = _json(cli, "--from-runs", "--db", db, "--save", str(tmp_path / "s.yaml"))
    assert code == 0 and [c["case"] for c in report["cases"]] == ["k1"]
    assert report["skipped"] == {"forks": ["k1-a", "k1-b"], "unfinished": ["waits"]}
    assert "# skipped 3 of 4 runs: " in (tmp_path / "s.yaml").read_text()
    error_line(cli("eval", "--from-runs", "--status", "awaiting_approval", "--db", db), 2,
               "--status 'awaiting_approval': a suite is built from runs that finished "
               "(allowed: done, failed, budget_exhausted, handed_over)")
    error_line(cli("eval", "--from-runs", "--workflow", "nope", "--db", db), 2,
               "no stored run matches --workflow 'nope'")


@pytest.mark.parametrize(("text", "fragment"), [
    (ONE_CASE.replace("    user: asha", "    usr: asha"),
     ":5: case 1 ('kettle'): unknown key 'usr' (allowed: name, goal, user, replies, "
     "decisions, expect)"),
    (ONE_CASE.replace("  - name: kettle", "  - name: kettle\n    expectt: {}").split(
        "    expect:")[0], ":3: case 1 ('kettle'): no expected outcome"),
    ("workflow: refund\ncases:\n  - goal: x\n    expect: {}\n",
     ":4: case 1: expect is empty"),
    ("workflow: refund\ncolour: red\ncases: []\n", ":2: the suite: unknown key 'colour'"),
    ("workflow: refund\ncases:\n  - goal: [\n", "not YAML"),
    (ONE_CASE.replace("status: done", "status: finished"),
     ":7: case 1 ('kettle'): status 'finished' is not a run status"),
])
def test_a_bad_suite_file_is_one_line_with_its_line_and_nothing_runs(
        cli: Cli, tmp_path: Path, text: str, fragment: str) -> None:
    suite = tmp_path / "bad.yaml"
    suite.write_text(text)
    lines = cli("eval", str(suite), "--policy", "eval_policies:pays_twice")
    assert lines.code == 2 and lines.out == "", lines
    assert fragment in lines.err and len(lines.err.splitlines()) <= 2, lines.err


@pytest.mark.parametrize(("args", "fragment"), [
    (("nope-suite",), "no suite 'nope-suite'"),
    (("missing.yaml",), "cannot read suite 'missing.yaml'"),
    (("{suite}", "--policy", "eval_policies:nothing"), "eval_policies"),
    ((), "give a SUITE, or --from-runs"),
    (("{suite}", "--from-runs"), "give a SUITE or --from-runs, not both"),
    (("{suite}", "--status", "done"), "apply to --from-runs only"),
    (("--from-runs", "--since", "yesterday"), "--since must be a date or time"),
])
def test_bad_eval_arguments(cli: Cli, tmp_path: Path, args: tuple[str, ...],
                            fragment: str) -> None:
    suite = tmp_path / "one.yaml"
    suite.write_text(ONE_CASE)
    given = [a.format(suite=suite) for a in args]
    error_line(cli("eval", *given), 2, fragment)


def test_an_expected_write_the_workflow_lacks_is_refused_before_anything_runs(
        cli: Cli, tmp_path: Path) -> None:
    suite = tmp_path / "typo.yaml"
    suite.write_text(ONE_CASE.replace("tool: refund_item", "tool: refund_itme"))
    error_line(cli("eval", str(suite)), 2,
               f"{suite}:9: case 'kettle': expect.writes: no tool 'refund_itme' in workflow "
               "'refund' (its write tools: refund_item, send_reply)")
    suite.write_text(ONE_CASE.replace("tool: send_reply", "tool: get_order").replace(
        "tool: refund_item", "tool: refund_itme"))
    both = cli("eval", str(suite), "--json")
    assert both.code == 2 and both.out == "", both
    assert both.err.splitlines() == [
        f"error: {suite}:9: case 'kettle': expect.writes: no tool 'refund_itme' in workflow "
        "'refund' (its write tools: refund_item, send_reply)",
        f"{suite}:11: case 'kettle': expect.writes: tool 'get_order' of workflow 'refund' "
        "is not a write (its write tools: refund_item, send_reply)"]


def test_an_unknown_workflow_or_check(cli: Cli, tmp_path: Path) -> None:
    suite = tmp_path / "w.yaml"
    suite.write_text(ONE_CASE.replace("workflow: refund", "workflow: refnud"))
    error_line(cli("eval", str(suite)), 2, "refnud")
    suite.write_text(ONE_CASE.replace("paid_at_most_once", "paid_never"))
    error_line(cli("eval", str(suite)), 2, "case 'kettle': check:")
