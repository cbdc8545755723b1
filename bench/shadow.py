"""Benchmark: real agents' recorded conversations through the desks, in shadow.

Every τ²-bench results file in the trajectories folder (default ``../shared/trajectories``
beside the repository, read only) whose domain has a registered desk (``retail`` →
``fsm shadow --workflow retail``, ``airline`` → ``--workflow airline``, which needs its
server installed: ``make airline-mcp``) is replayed through it, and ``bench/shadow.md``
gets the matrix of τ²-bench's pass/fail against the verdicts, the refusals by rule and the
conversations per second. A file whose desk does not exist yet is listed as skipped.

    python bench/shadow.py                               # make shadow
    python bench/shadow.py --dir ../shared/trajectories --markdown-out bench/shadow.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fsm.definition.registry import load_workflow, registered  # noqa: E402
from fsm.sandbox.shadow_report import shadow_files  # noqa: E402
from fsm.sandbox.shadow_rules import rules_for  # noqa: E402

DEFAULT_DIR = HERE.parent.parent / "shared" / "trajectories"


def domain(path: Path) -> str | None:
    """The τ²-bench domain a results file says it is of (``info.environment_info``)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    info = doc.get("info") if isinstance(doc, dict) else None
    env = info.get("environment_info") if isinstance(info, dict) else None
    name = env.get("domain_name") if isinstance(env, dict) else None
    return name if isinstance(name, str) else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the trajectories folder")
    ap.add_argument("--markdown-out", type=Path, default=HERE / "shadow.md")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)
    if not args.dir.is_dir():
        print(f"error: no trajectories folder at {args.dir} (see its README: τ²-bench "
              "leaderboard files)", file=sys.stderr)
        return 2
    desks = registered()
    by_desk: dict[str, list[Path]] = {}
    skipped: list[str] = []
    for path in sorted(args.dir.glob("*.json")):
        name = domain(path)
        if name in desks:
            by_desk.setdefault(name, []).append(path)
        else:
            skipped.append(f"`{path.name}` (domain {name or 'unknown'}: no desk yet)")
    parts = ["# Real agents through the desks, in shadow", "",
             "Written by `make shadow` (`bench/shadow.py`): each τ²-bench leaderboard file "
             f"in `{_shown(args.dir)}` whose desk exists, replayed with `fsm shadow` "
             "(nothing written anywhere). The refusals in conversations τ²-bench passed "
             "are classified in `bench/shadow_review.md`.", ""]
    reports = {}
    for desk, paths in by_desk.items():
        spec = load_workflow(desk)
        report = shadow_files(spec, desk, [str(p) for p in paths], rules_for(desk, spec))
        reports[desk] = report.as_json(spec)
        parts.append(report.markdown(spec, title=f"Desk `{desk}`", level=2))
        for name, s in reports[desk]["files"].items():
            print(f"{desk} {name}: {s['conversations']} conversations, "
                  f"{s['conversations_per_second']} per second, matrix {s['matrix']}")
    if skipped:
        parts += ["## Skipped", "", *[f"- {s}" for s in skipped], ""]
    args.markdown_out.write_text("\n".join(parts).rstrip() + "\n", encoding="utf-8")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(reports, indent=1, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
    return 0


def _shown(path: Path) -> str:
    try:
        inside = path.resolve().relative_to(HERE.parent.parent.resolve()).as_posix()
    except ValueError:
        return str(path)
    return f"../{inside}"


if __name__ == "__main__":
    sys.exit(main())
