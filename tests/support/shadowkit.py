"""What the tests of the recorded leaderboard files share: where the files and the review
are, the review's rows, and the targets every file's replay is held to."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from paths import ROOT

from fsm.sandbox.shadow_report import outcome_class

TRAJECTORIES = ROOT.parent / "shared" / "trajectories"
REVIEW = ROOT / "bench" / "shadow_review.md"
#: A row of the review's table: simulation id, task, turn, call, class.
ROW = re.compile(r"^\| ([0-9a-f-]{36}) \| (\d+) \| (\d+) \| (\w+) \| "
                 r"(latent violation|false refusal) \|", re.M)


def reviewed(text: str | None = None) -> dict[tuple[str, int, str], str]:
    """``(simulation id, turn, call) -> class`` of the review's rows (of ``text``, a part
    of it, else the whole review)."""
    return {(m[1], int(m[3]), m[4]): m[5]
            for m in ROW.finditer(REVIEW.read_text() if text is None else text)}


def assert_meets_the_targets(outcomes: Sequence[Any], total: int, passing: int,
                             review: dict[tuple[str, int, str], str]) -> None:
    """Every conversation read; at most 5 % unmappable or unreadable, each with its
    reason; every refusal names its rule; every refusal in a conversation τ²-bench passed
    is in ``review``, and at most 2 % of those conversations carry a false refusal."""
    assert len(outcomes) == total
    passed = [o for o in outcomes if outcome_class(o.reward) == "passed"]
    assert len(passed) == passing
    unmapped = [o for o in outcomes if o.verdict in ("unmappable", "unreadable")]
    assert len(unmapped) <= 0.05 * len(outcomes) and all(o.reason for o in unmapped)
    assert all(r.rule for o in outcomes for r in o.refusals)
    refused = {(o.simulation_id, o.refusal.turn, o.refusal.tool)
               for o in passed if o.refusal is not None}
    assert refused <= set(review), f"not reviewed: {sorted(refused - set(review))}"
    false = [k for k in refused if review[k] == "false refusal"]
    assert len(false) <= 0.02 * len(passed), false
