"""``bench/stress.py`` (``make stress``): it runs the selected tests the asked number of
times beside CPU burners and counts every failure with the run it happened in."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from paths import bench_script


def test_every_failure_is_counted_with_its_run_and_the_burners_are_stopped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_some.py").write_text(
        "def test_passes():\n    pass\n\n"
        "def test_fails():\n    assert 1 == 2\n")
    out = tmp_path / "stress.json"
    stress = bench_script("stress")
    burners: list[int] = []
    real = stress.burners

    def counted(count: int):  # type: ignore[no-untyped-def]
        cm = real(count)
        procs = cm.__enter__()
        burners.extend(p.pid for p in procs)

        class Wrap:
            def __enter__(self) -> object:
                return procs

            def __exit__(self, *exc: object) -> None:
                cm.__exit__(*exc)
        return Wrap()

    monkeypatch.setattr(stress, "burners", counted)
    code = stress.main(["--runs", "2", "--burners", "1", "--workers", "0", "--marker", "",
                        "--json-out", str(out), "--logs", str(tmp_path / "logs"), "--",
                        str(suite), "-c",
                        str(suite / "pytest.ini"), "--rootdir", str(suite)])
    printed = capsys.readouterr().out
    assert code == 1
    result = json.loads(out.read_text())
    assert [(r["run"], r["passed"], r["failed"]) for r in result["runs"]] == [(1, 1, 1),
                                                                              (2, 1, 1)]
    assert result["failures"] == 2 and result["burners"] == 1
    assert all(r["failures"] == ["test_some::test_fails"] for r in result["runs"])
    assert "2 failure(s) in 2 run(s)" in printed and "run 2: test_some::test_fails" in printed
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "stress-run-1.log", "stress-run-2.log"]
    assert len(burners) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(burners[0], 0)


def test_bad_arguments_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        bench_script("stress").main(["--runs", "0"])
    assert exited.value.code == 2
    assert "--runs must be at least 1" in capsys.readouterr().err
