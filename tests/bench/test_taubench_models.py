"""``bench/taubench.py --model URL``: the desk and the customer played by models, pass^k
over the trials. Tested only against the fake OpenAI-compatible server, on loopback: one
trial in which the desk keeps the policy, one in which it tries to write without a yes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fake_openai import FakeOpenAI, call, text
from paths import ROOT

from workflows.retail.simulated import pass_hat_k

ORDER = "#W8835847"  # task 88: Daiki Silva cancels his pending order, ordered by mistake
MISTAKE = {"order_id": ORDER, "reason": "ordered by mistake"}


def test_pass_hat_k_is_tau2_benchs() -> None:
    trials = {"a": [True, True, False, True], "b": [False] * 4, "c": [True] * 4}
    assert pass_hat_k(trials, 1) == (3 / 4 + 0 + 1) / 3
    assert pass_hat_k(trials, 2) == (3 / 6 + 0 + 1) / 3
    assert pass_hat_k(trials, 4) == (0 + 0 + 1) / 3
    assert pass_hat_k({"a": [True]}, 2) == 0.0


def test_models_play_the_desk_and_the_customer(tmp_path: Path) -> None:
    with FakeOpenAI() as desk, FakeOpenAI() as customer:
        desk.script(
            # Trial 1: authenticates, reads, proposes, writes what was confirmed.
            call("find_user_id_by_email", {"email": "daiki.silva6295@example.com"}),
            call("get_order_details", {"order_id": ORDER}),
            call("advance", {"event": "propose", "tool": "cancel_pending_order",
                             "args": MISTAKE}, content="Cancel it (ordered by mistake)?"),
            call("cancel_pending_order", MISTAKE),
            call("advance", {"event": "finish"}),
            # Trial 2: writes without a yes, then proposes another reason; the customer
            # says no.
            call("find_user_id_by_email", {"email": "daiki.silva6295@example.com"}),
            call("cancel_pending_order", MISTAKE),
            call("get_order_details", {"order_id": ORDER}),
            call("advance", {"event": "propose", "tool": "cancel_pending_order",
                             "args": {"order_id": ORDER, "reason": "no longer needed"}}),
            call("advance", {"event": "finish"}),
        )
        customer.script(text(f"Hi, please cancel my order {ORDER}."), text("yes"),
                        text(f"Hello, I want order {ORDER} cancelled."),
                        text("no, I ordered it by mistake"))
        out = tmp_path / "models.json"
        proc = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "taubench.py"), "--model", desk.base_url,
             "--model-name", "fake-desk", "--customer", customer.base_url,
             "--customer-model", "fake-customer", "--trials", "2", "--tasks", "88",
             "--json-out", str(out)],
            capture_output=True, text=True, timeout=300, cwd=str(ROOT))
        assert proc.returncode == 0, proc.stderr
        result = json.loads(out.read_text())
        assert desk.pending == customer.pending == 0
        first_ask = customer.chat[0].body["messages"]
        proposal_shown = customer.chat[1].body["messages"][-1]["content"]
    assert [r["success"] for r in result["rows"]] == [True, False]
    assert result["pass_hat_k"] == {"1": 0.5, "2": 0.0}
    assert result["refused_attempts"] == 1
    assert "tool 'cancel_pending_order' is not offered in state 'serving'" in \
        result["rows"][1]["refusals"][0]
    assert "cancel the whole order" in first_ask[0]["content"]  # the task's instructions
    assert first_ask[1] == {"role": "user", "content": "Hi! How can I help you today?"}
    # The customer is shown fsm's rendering of the exact call, not the model's words.
    assert proposal_shown.startswith(
        "Cancel order #W8835847 (reason: ordered by mistake)"), proposal_shown
    assert "Cancel it (ordered by mistake)?" not in proposal_shown
    assert "The agent asks you to confirm: cancel_pending_order" in proposal_shown
    assert "| 1 | 0.500 |" in proc.stdout and "| 2 | 0.000 |" in proc.stdout
