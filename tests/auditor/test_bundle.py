"""An evidence bundle is checked offline, with the deployment's public key, by a checker
that needs only the standard library; a change of one byte anywhere in it is caught."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cli_inproc import Cli
from paths import ROOT

from fsm import Engine, SQLiteStore, ed25519
from fsm.auditor import bundle, bundle_rows
from fsm.auditor.export import export
from workflows.refund import Shop, build, clerk

LARGE = "Order A-1002: the headphones stopped working"
LAMP = "Order A-1003: the lamp flickers"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A database with a large refund approved and paid (``big``) and a run handed over
    and closed at the desk (``lamp``)."""
    db = tmp_path / "runs.db"
    with SQLiteStore(str(db)) as store, Shop(str(db)) as shop:
        engine = Engine(build(shop.seed_demo()), store, clerk)
        meta = {"workflow_ref": "refund", "policy": "default"}
        engine.start(LARGE, user="ravi", run_id="big", meta=meta)
        engine.decide("big", True, "priya", "receipt checked", amend={"amount_paise": 150_000})
        engine.start(LAMP, user="ravi", run_id="lamp", meta=meta)
        engine.close_handover("lamp", "sam", "resolved", "sent a new lamp")
    return db


def _bundle(db: Path, out: Path, *run_ids: str) -> Path:
    with SQLiteStore(str(db)) as store:
        data = export(store, list(run_ids), lambda run: build(), now=1.0, by="audrey")
    out.write_bytes(data)
    return out


def keys_of(db: Path) -> dict[str, bytes]:
    """The public keys of the database's key file (what ``fsm keys show`` prints)."""
    with SQLiteStore(str(db), readonly=True) as store:
        return dict(store.keys.public)


def _check(path: Path, *args: str, cwd: Path | None = None,
           key: str | None = None) -> subprocess.CompletedProcess[str]:
    """The checker as an auditor runs it: a copy of its three files in a folder of their
    own, by an interpreter with no site-packages (``-S``) that ignores the environment and
    this folder (``-I``), given the public key of the database beside ``path``."""
    where = cwd or path.parent
    folder = where / "checker"
    folder.mkdir(exist_ok=True)
    for module in (bundle.__file__, bundle_rows.__file__, ed25519.__file__):
        shutil.copy(Path(module), folder)
    if key is None:
        (public,) = keys_of(path.parent / "runs.db").values()
        key = public.hex()
    return subprocess.run([sys.executable, "-I", "-S", str(folder / "bundle.py"), "verify",
                           str(path), "--key", key, *args], capture_output=True, text=True,
                          cwd=where, timeout=60)


def test_the_checker_proves_the_chain_the_rows_and_the_head_with_the_stdlib_alone(
        runs: Path, tmp_path: Path) -> None:
    zipped = _bundle(runs, tmp_path / "evidence.zip", "big", "lamp")
    done = _check(zipped)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("bundle verified")
    with SQLiteStore(str(runs)) as store:
        for run_id in ("big", "lamp"):
            count, head = store.log_head(run_id)
            assert f"run {run_id}: {count} events form one signed hash chain from the " \
                   f"genesis hash to head {head}" in done.stdout
    assert "1 approvals" in done.stdout and "not proved:" in done.stdout
    # The module form, from the source tree, loads nothing beyond the standard library.
    probe = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv = ['b', 'verify', "
             "sys.argv[2], '--key', sys.argv[3]]\ntry:\n    runpy.run_module("
             "'fsm.auditor.bundle', run_name='__main__')\nexcept SystemExit as e:\n"
             "    code = e.code\nprint(sorted(m for m in "
             "sys.modules if m.split('.')[0] in ('pydantic', 'typer', 'transitions', 'rich')))"
             "\nsys.exit(code)")
    (public,) = keys_of(runs).values()
    module = subprocess.run([sys.executable, "-I", "-S", "-c", probe, str(ROOT), str(zipped),
                             public.hex()],
                            capture_output=True, text=True, timeout=60)
    assert module.returncode == 0, module.stderr
    assert module.stdout.strip().endswith("[]")


def test_the_bundle_holds_what_an_auditor_needs(runs: Path, tmp_path: Path) -> None:
    zipped = _bundle(runs, tmp_path / "evidence.zip", "big")
    with zipfile.ZipFile(zipped) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("manifest.json"))
        (entry,) = manifest["runs"]
        folder = entry["folder"]
        approvals = [json.loads(x) for x in z.read(f"{folder}/approvals.jsonl").splitlines()]
        audit = json.loads(z.read(f"{folder}/audit.json"))
        tables = json.loads(z.read(f"definitions/{entry['definition_hash']}/tables.json"))
        svg = z.read(f"{folder}/diagram.svg").decode()
        verify_md = z.read(f"definitions/{entry['definition_hash']}/verify.md").decode()
    for name in ("events.jsonl", "transcript.jsonl", "views.jsonl", "effects.jsonl",
                 "run.json", "diagram.dot", "diagram.svg", "handovers.jsonl"):
        assert f"{folder}/{name}" in names
    assert [(a["decision"], a["reviewer"], a["approved_args"]["amount_paise"])
            for a in approvals] == [("approved", "priya", 150_000)]
    assert audit["ok"] and audit["head"] == entry["head"]
    assert tables["transitions"]["verifying"]["verified"] == "deciding"
    assert "run big" in svg and "invariant" in verify_md.lower()


def _rewritten(zipped: Path, out: Path, name: str, at: int) -> Path:
    """``zipped`` with one byte of member ``name`` changed (at ``at``, from its end when
    negative), everything else as it was."""
    with zipfile.ZipFile(zipped) as z:
        members = [(i.filename, z.read(i)) for i in z.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for member, data in members:
            if member == name and data:
                b = bytearray(data)
                b[at] = (b[at] + 1) % 256 if b[at] not in (0x7E,) else 0x21
                data = bytes(b)
            z.writestr(member, data)
    out.write_bytes(buf.getvalue())
    return out


def test_a_change_of_one_byte_anywhere_is_caught(runs: Path, tmp_path: Path) -> None:
    zipped = _bundle(runs, tmp_path / "evidence.zip", "big", "lamp")
    with zipfile.ZipFile(zipped) as z:
        members = [(i.filename, i.file_size) for i in z.infolist() if i.file_size]
    assert len(members) > 15
    for name, size in members:
        for at in sorted({0, size // 2, size - 1}):
            changed = _rewritten(zipped, tmp_path / "changed.zip", name, at)
            report = None
            try:
                report = bundle.verify(str(changed), keys=keys_of(runs))
            except bundle.Unusable:
                continue  # not even readable: caught
            assert not report.ok, f"a change at byte {at} of {name} went unnoticed"
    done = _check(_rewritten(zipped, tmp_path / "changed.zip", "runs/1/events.jsonl", 400))
    assert done.returncode == 1 and "bundle FAILED" in done.stdout


def test_a_change_with_the_manifest_made_again_is_caught_by_the_signature_and_the_chain(
        runs: Path, tmp_path: Path) -> None:
    zipped = _bundle(runs, tmp_path / "evidence.zip", "big")
    with zipfile.ZipFile(zipped) as z:
        files = {i.filename: z.read(i) for i in z.infolist()}
    events = files["runs/1/events.jsonl"].decode().replace('"priya"', '"mallory"')
    files["runs/1/events.jsonl"] = events.encode()
    manifest = json.loads(files["manifest.json"])
    manifest["files"]["runs/1/events.jsonl"] = bundle.sha256(files["runs/1/events.jsonl"])
    files["manifest.json"] = json.dumps(manifest).encode()
    forged = tmp_path / "forged.zip"
    with zipfile.ZipFile(forged, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    report = bundle.verify(str(forged), keys=keys_of(runs))
    assert any("signature does not verify" in p for p in report.problems), report.text()
    assert any("hash does not match its contents" in p for p in report.problems), report.text()


def test_a_bundle_exported_before_a_prune_verifies_against_the_tombstone(
        runs: Path, tmp_path: Path, cli: Cli) -> None:
    zipped = _bundle(runs, tmp_path / "evidence.zip", "big")
    with SQLiteStore(str(runs)) as store:
        count, head = store.log_head("big")
    pruned = cli("prune", "--finished-before", "9999-01-01", "--by", "ops", "--db", str(runs))
    assert pruned.code == 0 and "pruned 2 runs" in pruned.out, pruned
    said = cli("audit", "big", "--db", str(runs))
    assert said.code == 0, said
    assert f"big: pruned; head {head}, {count} events" in said.out
    checked = cli("audit", "big", "--bundle", str(zipped), "--db", str(runs))
    assert checked.code == 0 and "the head is the one expected" in checked.out, checked
    assert _check(zipped, "--expect", f"big={head}:{count}").returncode == 0
    wrong = _check(zipped, "--expect", f"big={'1' * 64}")
    assert wrong.returncode == 1 and "not the expected" in wrong.stdout
