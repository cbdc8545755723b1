"""``fsm worker``'s arguments for the two kinds of worker: what only ``--async`` takes is
refused on a threaded worker in one line, before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_inproc import Cli, error_line


@pytest.mark.parametrize("args, fragments", [
    (["--concurrency", "2000"], ["2000 runs at once needs --async",
                                 "--concurrency is at most 1000"]),
    (["--threads", "3"], ["--threads is for --async workers"]),
    (["--store-on-loop"], ["--store-on-loop is for --async workers"]),
    (["--async", "--concurrency", "10001"], ["--concurrency", "less than or equal to 10000"]),
    (["--async", "--threads", "0"], ["--threads", "greater than or equal to 1"]),
])
def test_what_only_an_async_worker_takes_is_refused_in_one_line(
        cli: Cli, tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    db = tmp_path / "runs.db"
    error_line(cli("worker", "--db", str(db), *args), 2, *fragments)
    assert not db.exists()  # refused before the store was opened
