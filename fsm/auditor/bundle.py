"""Check an evidence bundle offline, with nothing but Python's standard library.

    python -m fsm.auditor.bundle verify FILE.zip [--expect RUN=HEAD[:EVENTS]]...

``fsm export`` writes a bundle (the format: docs/reference/bundle.md). This checker needs
no fsm, no database and no third-party package; it can be copied and run on its own. It
proves:

- every file is the one the manifest lists (SHA-256), none is missing or added, and the
  manifest's own digest holds;
- each run's log is one hash chain from the genesis hash: each row's hash is SHA-256 of
  the previous hash and the row's canonical JSON, and the last one is the head the run
  row recorded, over the number of events it recorded;
- every row the log covers still has the hash its commit recorded: the run's snapshot,
  every range of transcript messages, the view of every step, every finished effect,
  every approval as requested and every decision;
- with ``--expect``, that the head (and the number of events) is the one you hold from
  elsewhere: ``fsm audit RUN`` prints it, and a pruned run's tombstone keeps it.

What it does not prove: that the audit verdict, the diagrams, the definition's tables
and the verifier's report say what fsm would say today; they are as exported (their
hashes are in the manifest). Nothing in a bundle proves that the log is the whole
story unless the head is checked against one kept elsewhere.

Exit status: 0 verified, 1 a check failed, 2 the command line or the file is unusable.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from dataclasses import dataclass, field
from typing import Any

FORMAT = "fsm-bundle/1"
MANIFEST = "manifest.json"
GENESIS = "0" * 64
#: An approval's fields that its decision sets (the rest is what was requested).
DECISION_FIELDS = ("decision", "reviewer", "note", "decided_at", "approved_args")


def canonical(value: Any) -> str:
    """Canonical JSON, as fsm hashes it: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def manifest_digest(manifest: dict[str, Any]) -> str:
    """The digest a manifest records of itself: over everything but the digest."""
    return sha256(canonical({k: v for k, v in manifest.items() if k != "digest"}))


class Unusable(Exception):
    """The file cannot be read as a bundle at all."""


@dataclass
class Report:
    """What a check proved, and what it found wrong."""

    proved: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        head = "bundle verified" if self.ok else f"bundle FAILED ({len(self.problems)} problems)"
        lines = [head]
        lines += [f"  proved: {p}" for p in self.proved]
        lines += [f"  problem: {p}" for p in self.problems]
        if self.ok:
            lines.append("  not proved: that the audit verdict, diagrams, tables and verifier "
                         "report are what fsm says today (they are as exported), nor that the "
                         "log is complete unless its head was checked against one kept "
                         "elsewhere (--expect)")
        return "\n".join(lines)


def _lines(files: dict[str, bytes], name: str) -> list[dict[str, Any]]:
    data = files.get(name)
    if data is None:
        return []
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def _chain(run_id: str, events: list[dict[str, Any]], problems: list[str]) -> str:
    """Check the hash chain; the hash of its last row (the genesis hash when empty)."""
    prev = GENESIS
    for i, row in enumerate(events):
        if row.get("seq") != i:
            problems.append(f"run {run_id}: event {i} is missing or out of order (found seq "
                            f"{row.get('seq')})")
            return prev
        if row.get("prev_hash") != prev:
            problems.append(f"run {run_id}: event seq {i} does not follow the row before it")
            return prev
        body = {k: v for k, v in row.items() if k != "hash"}
        if sha256(prev + canonical(body)) != row.get("hash"):
            problems.append(f"run {run_id}: event seq {i}'s hash does not match its contents "
                            "(the row was changed)")
            return prev
        prev = str(row["hash"])
    return prev


@dataclass
class _Run:
    run_id: str
    meta: dict[str, Any]
    events: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    views: dict[int, dict[str, Any]]
    effects: dict[str, dict[str, Any]]
    approvals: dict[str, dict[str, Any]]


def _covered(run: _Run, problems: list[str]) -> int:
    """Check each row the log's commits covered; how many were checked."""
    checked = 0
    covering = [e for e in run.events if isinstance(e.get("detail", {}).get("rows"), dict)]
    if covering:
        rows = covering[-1]["detail"]["rows"]
        checked += 1
        if rows.get("snapshot") != sha256(str(run.meta.get("snapshot", ""))):
            problems.append(f"run {run.run_id}: the run's snapshot differs from what event seq "
                            f"{covering[-1]['seq']} recorded")
    for e in covering:
        rows = e["detail"]["rows"]
        try:
            checked += _covered_rows(run, e["seq"], rows, problems)
        except (TypeError, ValueError, KeyError, IndexError):
            problems.append(f"run {run.run_id}: event seq {e['seq']}'s record of the rows its "
                            "commit wrote is malformed")
    return checked


def _covered_rows(run: _Run, seq: int, rows: dict[str, Any], problems: list[str]) -> int:
    checked = 0
    where = f"run {run.run_id}: event seq {seq}:"
    if "messages" in rows:
        start, end, digest = rows["messages"]
        checked += 1
        if sha256(canonical(run.messages[start:end])) != digest:
            problems.append(f"{where} transcript messages {start}..{end - 1} were changed, "
                            "removed or reordered")
    if "view" in rows:
        step, digest = rows["view"]
        checked += 1
        view = run.views.get(step)
        if view is None or sha256(canonical(view)) != digest:
            problems.append(f"{where} the view of step {step} was changed or removed")
    for key, digest in (rows.get("effects") or {}).items():
        checked += 1
        eff = run.effects.get(key)
        if eff is None or eff.get("status") != "DONE" or sha256(canonical(
                {"status": "DONE", "result": eff.get("result"),
                 "error": eff.get("error")})) != digest:
            problems.append(f"{where} the effect {key} was changed or removed")
    checked += _covered_approval(run, where, rows, problems)
    return checked


def _covered_approval(run: _Run, where: str, rows: dict[str, Any],
                      problems: list[str]) -> int:
    checked = 0
    if "approval" in rows:
        aid, digest = rows["approval"]
        checked += 1
        a = run.approvals.get(aid)
        asked = {k: v for k, v in (a or {}).items() if k not in DECISION_FIELDS}
        if a is None or sha256(canonical(asked)) != digest:
            problems.append(f"{where} approval {aid} as requested was changed or removed")
    if "decision" in rows:
        aid, digest = rows["decision"]
        checked += 1
        a = run.approvals.get(aid) or {}
        decided = {"approval_id": aid, "decision": a.get("decision"),
                   "reviewer": a.get("reviewer"), "note": a.get("note"),
                   "time": a.get("decided_at"), "args": a.get("approved_args")}
        if not a or sha256(canonical(decided)) != digest:
            problems.append(f"{where} the decision on approval {aid} was changed")
    return checked


def _read_run(files: dict[str, bytes], entry: dict[str, Any]) -> _Run:
    folder = entry["folder"]
    meta = json.loads(files[f"{folder}/run.json"].decode())
    return _Run(
        run_id=entry["run_id"], meta=meta, events=_lines(files, f"{folder}/events.jsonl"),
        messages=_lines(files, f"{folder}/transcript.jsonl"),
        views={v["step"]: v for v in _lines(files, f"{folder}/views.jsonl")},
        effects={e["key"]: e for e in _lines(files, f"{folder}/effects.jsonl")},
        approvals={a["approval_id"]: a for a in _lines(files, f"{folder}/approvals.jsonl")},
    )


def _check_run(files: dict[str, bytes], entry: dict[str, Any],
               expect: dict[str, tuple[str, int | None]], report: Report) -> None:
    run = _read_run(files, entry)
    problems: list[str] = []
    head = _chain(run.run_id, run.events, problems)
    count = len(run.events)
    recorded = (run.meta.get("log_head"), run.meta.get("log_count"))
    if not problems and (head, count) != recorded:
        problems.append(f"run {run.run_id}: its log ends at {head} after {count} events, but "
                        f"the run row recorded {recorded[0]} after {recorded[1]}")
    if (entry.get("head"), entry.get("events")) != (head, count) and not problems:
        problems.append(f"run {run.run_id}: the manifest names another head or count")
    checked = _covered(run, problems) if not problems else 0
    wanted = expect.pop(run.run_id, None)
    if wanted is not None and not problems:
        if wanted[0] != head or wanted[1] not in (None, count):
            problems.append(f"run {run.run_id}: its head is {head} after {count} events, not "
                            f"the expected {wanted[0]}"
                            + (f" after {wanted[1]}" if wanted[1] is not None else ""))
    report.problems += problems
    if not problems:
        report.proved.append(
            f"run {run.run_id}: {count} events form one hash chain from the genesis hash to "
            f"head {head}, which the run row recorded; {checked} rows its commits wrote "
            f"({len(run.messages)} transcript messages, {len(run.views)} views, "
            f"{len(run.effects)} effects, {len(run.approvals)} approvals) have the hashes the "
            "log recorded" + ("; the head is the one expected" if wanted else ""))


def _read(path: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    try:
        with zipfile.ZipFile(path) as z:
            files = {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise Unusable(f"{path}: not a readable zip file ({exc})") from None
    try:
        manifest = json.loads(files[MANIFEST].decode())
    except KeyError:
        raise Unusable(f"{path}: no {MANIFEST}: not an fsm evidence bundle") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unusable(f"{path}: {MANIFEST} is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise Unusable(f"{path}: not a bundle of format {FORMAT}")
    return manifest, files


def _check_files(manifest: dict[str, Any], files: dict[str, bytes], report: Report) -> None:
    if manifest.get("digest") != manifest_digest(manifest):
        report.problems.append(f"{MANIFEST} was changed (its digest does not match)")
    listed: dict[str, str] = manifest.get("files") or {}
    for name, digest in sorted(listed.items()):
        if name not in files:
            report.problems.append(f"{name} is listed in the manifest but missing")
        elif sha256(files[name]) != digest:
            report.problems.append(f"{name} was changed (its SHA-256 is not the manifest's)")
    extra = sorted(set(files) - set(listed) - {MANIFEST})
    if extra:
        report.problems.append(f"files the manifest does not list: {', '.join(extra)}")
    if not report.problems:
        report.proved.append(f"all {len(listed)} files are those the manifest lists, "
                             "unchanged, and the manifest's digest holds")


def verify(path: str, expect: dict[str, tuple[str, int | None]] | None = None) -> Report:
    """Check the bundle at ``path``; ``expect`` maps run ids to the (head, events) held
    from elsewhere. :class:`Unusable` when it cannot be read as a bundle at all."""
    manifest, files = _read(path)
    report = Report()
    wanted = dict(expect or {})
    _check_files(manifest, files, report)
    for entry in manifest.get("runs") or []:
        try:
            _check_run(files, entry, wanted, report)
        except (KeyError, TypeError, ValueError, UnicodeDecodeError, AttributeError) as exc:
            report.problems.append(f"run {entry.get('run_id', '?')}: its files cannot be read "
                                   f"({type(exc).__name__}: {exc})")
    for run_id in sorted(wanted):
        report.problems.append(f"run {run_id} was expected but is not in the bundle")
    return report


def _expectations(items: list[str]) -> dict[str, tuple[str, int | None]]:
    out: dict[str, tuple[str, int | None]] = {}
    for item in items:
        run_id, sep, rest = item.rpartition("=")
        head, _, count = rest.partition(":")
        if not sep or not run_id or len(head) != 64 or (count and not count.isdigit()):
            raise Unusable(f"--expect takes RUN=HEAD or RUN=HEAD:EVENTS (a 64-digit hex "
                           f"head), not {item!r}")
        out[run_id] = (head, int(count) if count else None)
    return out


USAGE = ("usage: python -m fsm.auditor.bundle verify FILE.zip [--expect RUN=HEAD[:EVENTS]]...")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "verify":
        print(USAGE, file=sys.stderr)
        return 2
    path, rest, expects = argv[1], argv[2:], []
    while rest:
        if rest[0] != "--expect" or len(rest) < 2:
            print(f"error: unknown argument {rest[0]!r}\n{USAGE}", file=sys.stderr)
            return 2
        expects.append(rest[1])
        rest = rest[2:]
    try:
        report = verify(path, _expectations(expects))
    except Unusable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = report.text() + "\n"
    if hasattr(sys.stdout, "buffer"):  # UTF-8 whatever the locale says
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode())
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(text)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
