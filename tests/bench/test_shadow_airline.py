"""The two airline leaderboard files through the airline desk in shadow (``make shadow``'s
run), held to issue 33's targets and checked against the airline section of
``bench/shadow_review.md``.

The files are read, never written, from ``../shared/trajectories/`` beside the repository
(see its README); without them this test fails and says where to put them.
"""

from __future__ import annotations

import pytest
from airline_env import airline_command
from shadowkit import REVIEW, TRAJECTORIES, assert_meets_the_targets, reviewed

from fsm.sandbox.shadow import replay_recorded
from fsm.sandbox.shadow_read import read_file
from workflows.airline import SHADOW, airline_server, build

#: Each file: conversations, and those τ²-bench scored 1.0.
FILES = {"airline-claude-sonnet-4-5.json": (50, 36), "airline-gpt-oss-120b.json": (50, 19)}


def _reviewed() -> dict[tuple[str, int, str], str]:
    return reviewed(REVIEW.read_text().split("# Review: refusals in conversations τ²-bench "
                                             "passed (airline)")[1])


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
    assert_meets_the_targets(outcomes, *FILES[name], _reviewed())
