"""The two airline leaderboard files through the airline desk in shadow (``make shadow``'s
run), held to issue 33's targets and checked against the airline section of
``bench/shadow_review.md``.

The files are read, never written, from ``../shared/trajectories/`` beside the repository
(see its README); without them this test fails and says where to put them.
"""

from __future__ import annotations

import re

import pytest
from airline_env import airline_command
from paths import ROOT

from fsm.sandbox.shadow import replay_recorded
from fsm.sandbox.shadow_read import read_file
from fsm.sandbox.shadow_report import outcome_class
from workflows.airline import SHADOW, airline_server, build

TRAJECTORIES = ROOT.parent / "shared" / "trajectories"
REVIEW = ROOT / "bench" / "shadow_review.md"
#: A row of the review's table: simulation id, task, turn, call, class.
ROW = re.compile(r"^\| ([0-9a-f-]{36}) \| (\d+) \| (\d+) \| (\w+) \| "
                 r"(latent violation|false refusal) \|", re.M)
#: Each file: conversations, and those τ²-bench scored 1.0.
FILES = {"airline-claude-sonnet-4-5.json": (50, 36), "airline-gpt-oss-120b.json": (50, 19)}


def _reviewed() -> dict[tuple[str, int, str], str]:
    airline = REVIEW.read_text().split("# Review: refusals in conversations τ²-bench passed "
                                       "(airline)")[1]
    return {(m[1], int(m[3]), m[4]): m[5] for m in ROW.finditer(airline)}


@pytest.mark.parametrize("name", sorted(FILES))
def test_an_airline_file_replays_to_the_targets_and_every_refusal_in_a_pass_is_reviewed(
        name: str) -> None:
    path = TRAJECTORIES / name
    assert path.is_file(), (
        f"{path} is missing: it is a τ²-bench airline leaderboard file (see "
        "../shared/trajectories/README.md); put it there, read-only, to run this test")
    # the server is started only to list its tools: recorded results answer every call
    outcomes = replay_recorded(build(airline_server(airline_command())), read_file(path),
                               SHADOW)
    total, passing = FILES[name]
    assert len(outcomes) == total
    passed = [o for o in outcomes if outcome_class(o.reward) == "passed"]
    assert len(passed) == passing
    unmapped = [o for o in outcomes if o.verdict in ("unmappable", "unreadable")]
    assert len(unmapped) <= 0.05 * len(outcomes) and all(o.reason for o in unmapped)
    assert all(r.rule for o in outcomes for r in o.refusals)
    reviewed = _reviewed()
    refused = {(o.simulation_id, o.refusal.turn, o.refusal.tool)
               for o in passed if o.refusal is not None}
    assert refused <= set(reviewed), f"not reviewed: {sorted(refused - set(reviewed))}"
    false = [k for k in refused if reviewed[k] == "false refusal"]
    assert len(false) <= 0.02 * len(passed), false
