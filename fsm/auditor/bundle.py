"""Check an evidence bundle offline, with nothing but Python's standard library.

    python -m fsm.auditor.bundle verify FILE.zip --key KEY [--key KEY]...
        [--expect RUN=HEAD[:EVENTS]]...

``fsm export`` writes a bundle (the format: docs/reference/bundle.md) and signs it with
the deployment's key; ``KEY`` is a public key ``fsm keys show`` prints (64 hex digits,
or ``ID HEX`` as printed). This checker needs no fsm, no database and no third-party
package: it is this file, :mod:`fsm.auditor.bundle_rows` and :mod:`fsm.ed25519`, which
can be copied into one folder and run there. It proves:

- the manifest is signed by one of the keys given (Ed25519), and every file is the one
  the manifest lists (SHA-256), none missing or added;
- each run's log is one hash chain from the genesis hash to the head the run row
  recorded, whose signature (or the manifest's, for a run still going) holds, and no
  event lies in a range no signed commit wrote;
- every row of every file is covered by a commit of its log: the snapshot, every
  transcript message, every view, every effect (against its claim too), every approval
  and decision, every handover row (against the desk events), and ``run.json`` against
  its snapshot; a row no commit wrote is named;
- no JSON object in it holds a key twice;
- with ``--expect``, that the head (and the number of events) is the one you hold from
  elsewhere: ``fsm audit RUN`` prints it, and a pruned run's tombstone keeps it.

What it does not prove: that the audit verdict, the diagrams, the definition's tables
and the verifier's report say what fsm would say today (they are as exported and
signed); that the log is the whole story, unless the head is checked against one kept
elsewhere (a run rolled back whole to an earlier signed state verifies); that the key
was not stolen.

Exit status: 0 verified, 1 a check failed, 2 the command line or the file is unusable.
"""

from __future__ import annotations

import json
import sys
import zipfile
from dataclasses import dataclass, field
from typing import Any

try:
    from fsm.auditor.bundle_rows import Run, canonical, check_rows, sha256
    from fsm.ed25519 import verify as ed25519_verify
except ImportError:  # the checker's files copied into one folder
    import os

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bundle_rows import Run, canonical, check_rows, sha256  # type: ignore[no-redef]
    from ed25519 import verify as ed25519_verify  # type: ignore[no-redef]

__all__ = ["FORMAT", "MANIFEST", "Report", "Unusable", "canonical", "main", "sha256",
           "signed_part", "verify"]

FORMAT = "fsm-bundle/2"
MANIFEST = "manifest.json"
GENESIS = "0" * 64
#: How a run's head signature that only its key file can check begins (a MAC).
MAC = "mac="


def signed_part(manifest: dict[str, Any]) -> bytes:
    """The bytes a manifest's signature signs: its canonical JSON without the signature."""
    return canonical({k: v for k, v in manifest.items() if k != "signature"}).encode()


class Unusable(Exception):
    """The file cannot be read as a bundle at all."""


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(f"a JSON object holds the key {key!r} twice")
        out[key] = value
    return out


def loads(text: str | bytes) -> Any:
    """``json.loads``, refusing an object that holds a key twice (which readers resolve
    differently: the checker and another tool could each see a different row)."""
    return json.loads(text, object_pairs_hook=_no_duplicates)


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
                         "report are what fsm says today (they are as exported and signed), "
                         "nor that the log is complete unless its head was checked against "
                         "one kept elsewhere (--expect), nor that the key was not stolen")
        return "\n".join(lines)


def _lines(files: dict[str, bytes], name: str) -> list[dict[str, Any]]:
    data = files.get(name)
    if data is None:
        return []
    return [loads(line) for line in data.decode().splitlines() if line.strip()]


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


def head_message(run_id: str, count: int, head: str, gaps: str) -> bytes:
    """What fsm signs of a run's head (``fsm.signing.head_message``)."""
    return f"fsm-head/1\n{run_id}\n{count}\n{head}\n{gaps}".encode()


def _head_signed(run: Run, count: int, head: str, keys: dict[str, bytes]) -> list[str]:
    """The run's head is signed (or, for a run still going, authenticated by a MAC that
    the manifest's signature vouches for), and no event is in a gap."""
    text = str(run.meta.get("log_sig") or "")
    parts = text.split(":")
    if len(parts) != 4 or parts[1] != str(count):
        return [f"run {run.run_id}: its head carries no signature of its {count} events"]
    kid, _, gaps, sig = parts
    out = [f"run {run.run_id}: events seq {g.replace('-', '..')} (end excluded) were "
           "written by no signed commit" for g in gaps.split(";") if g]
    if sig.startswith(MAC):
        return out  # checked by the exporter with the key file; the manifest vouches
    public = keys.get(kid)
    if public is None:
        return out + [f"run {run.run_id}: its head is signed with key {kid}, which is not "
                      "one of the keys given"]
    try:
        good = ed25519_verify(public, head_message(run.run_id, count, head, gaps),
                              bytes.fromhex(sig))
    except ValueError:
        good = False
    return out + ([] if good else [f"run {run.run_id}: its head's signature does not verify"])


def _read_run(files: dict[str, bytes], entry: dict[str, Any]) -> Run:
    folder = entry["folder"]
    meta = loads(files[f"{folder}/run.json"].decode())
    return Run(
        run_id=entry["run_id"], meta=meta, events=_lines(files, f"{folder}/events.jsonl"),
        messages=_lines(files, f"{folder}/transcript.jsonl"),
        views=_lines(files, f"{folder}/views.jsonl"),
        effects=_lines(files, f"{folder}/effects.jsonl"),
        approvals=_lines(files, f"{folder}/approvals.jsonl"),
        handovers=_lines(files, f"{folder}/handovers.jsonl"),
    )


def _check_run(files: dict[str, bytes], entry: dict[str, Any], keys: dict[str, bytes],
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
    if run.run_id != run.meta.get("run_id") or any(e.get("run_id") != run.run_id
                                                   for e in run.events):
        problems.append(f"run {run.run_id}: its files name another run")
    checked = 0
    if not problems:
        problems += _head_signed(run, count, head, keys)
        found, checked = check_rows(run)
        problems += found
    wanted = expect.pop(run.run_id, None)
    if wanted is not None and not problems:
        if wanted[0] != head or wanted[1] not in (None, count):
            problems.append(f"run {run.run_id}: its head is {head} after {count} events, not "
                            f"the expected {wanted[0]}"
                            + (f" after {wanted[1]}" if wanted[1] is not None else ""))
    report.problems += problems
    if not problems:
        report.proved.append(
            f"run {run.run_id}: {count} events form one signed hash chain from the genesis "
            f"hash to head {head}, which the run row recorded; all {checked} rows of its "
            f"files ({len(run.messages)} transcript messages, {len(run.views)} views, "
            f"{len(run.effects)} effects, {len(run.approvals)} approvals, "
            f"{len(run.handovers)} handovers, run.json) are covered by its commits"
            + ("; the head is the one expected" if wanted else ""))


def _read(path: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    try:
        with zipfile.ZipFile(path) as z:
            names = [i.filename for i in z.infolist() if not i.is_dir()]
            if len(names) != len(set(names)):
                raise Unusable(f"{path}: the zip file holds a member name twice")
            files = {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise Unusable(f"{path}: not a readable zip file ({exc})") from None
    try:
        manifest = loads(files[MANIFEST].decode())
    except KeyError:
        raise Unusable(f"{path}: no {MANIFEST}: not an fsm evidence bundle") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unusable(f"{path}: {MANIFEST} is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise Unusable(f"{path}: not a bundle of format {FORMAT}")
    return manifest, files


def _check_signature(manifest: dict[str, Any], keys: dict[str, bytes],
                     report: Report) -> None:
    signer = manifest.get("key")
    kid = str(signer.get("id")) if isinstance(signer, dict) else "(none)"
    sig = str(manifest.get("signature") or "")
    if not keys:
        report.problems.append("no public key was given (--key): who signed the bundle "
                               "cannot be checked")
        return
    public = keys.get(kid)
    if public is None:
        report.problems.append(f"{MANIFEST} is signed with key {kid}, which is not one of "
                               "the keys given")
        return
    try:
        good = ed25519_verify(public, signed_part(manifest), bytes.fromhex(sig))
    except ValueError:
        good = False
    if not good:
        report.problems.append(f"{MANIFEST}'s signature does not verify with key {kid} (the "
                               "manifest was changed, or signed by another key)")
    else:
        report.proved.append(f"{MANIFEST} is signed with key {kid}")


def _check_files(manifest: dict[str, Any], files: dict[str, bytes], report: Report) -> None:
    before = len(report.problems)
    listed: dict[str, str] = manifest.get("files") or {}
    for name, digest in sorted(listed.items()):
        if name not in files:
            report.problems.append(f"{name} is listed in the manifest but missing")
        elif sha256(files[name]) != digest:
            report.problems.append(f"{name} was changed (its SHA-256 is not the manifest's)")
    extra = sorted(set(files) - set(listed) - {MANIFEST})
    if extra:
        report.problems.append(f"files the manifest does not list: {', '.join(extra)}")
    if len(report.problems) == before:
        report.proved.append(f"all {len(listed)} files are those the manifest lists, "
                             "unchanged")


def verify(path: str, expect: dict[str, tuple[str, int | None]] | None = None,
           keys: dict[str, bytes] | None = None) -> Report:
    """Check the bundle at ``path`` against the public ``keys`` (key id → 32 raw bytes);
    ``expect`` maps run ids to the (head, events) held from elsewhere.
    :class:`Unusable` when it cannot be read as a bundle at all."""
    manifest, files = _read(path)
    report = Report()
    trusted = dict(keys or {})
    wanted = dict(expect or {})
    _check_signature(manifest, trusted, report)
    _check_files(manifest, files, report)
    for entry in manifest.get("runs") or []:
        try:
            _check_run(files, entry, trusted, wanted, report)
        except (KeyError, TypeError, ValueError, UnicodeDecodeError, AttributeError,
                IndexError) as exc:
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


def key_of(text: str) -> tuple[str, bytes]:
    """A public key as given: ``HEX`` (64 hex digits) or ``ID HEX`` (as ``fsm keys show``
    prints it); its id is the first 16 hex digits of the SHA-256 of its bytes."""
    raw = next((t for t in text.split() if len(t) == 64), "")
    try:
        public = bytes.fromhex(raw)
    except ValueError:
        public = b""
    if len(public) != 32:
        raise Unusable(f"--key takes a public key of 64 hex digits (fsm keys show prints "
                       f"it), not {text!r}")
    return sha256(public)[:16], public


USAGE = ("usage: python -m fsm.auditor.bundle verify FILE.zip --key KEY [--key KEY]... "
         "[--expect RUN=HEAD[:EVENTS]]...")


def _arguments(rest: list[str]) -> tuple[list[str], list[str]]:
    expects: list[str] = []
    keys: list[str] = []
    while rest:
        if rest[0] not in ("--expect", "--key") or len(rest) < 2:
            raise Unusable(f"unknown argument {rest[0]!r}\n{USAGE}")
        (expects if rest[0] == "--expect" else keys).append(rest[1])
        rest = rest[2:]
    return expects, keys


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "verify":
        print(USAGE, file=sys.stderr)
        return 2
    try:
        expects, keys = _arguments(argv[2:])
        report = verify(argv[1], _expectations(expects), dict(map(key_of, keys)))
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
