"""A hand-edited bundle never verifies, whatever it edits and whatever it recomputes.

Each edit below is one of those that verified before bundles were signed. The forger
recomputes every file hash of the manifest and signs the manifest again with a key of
their own. Checked with the deployment's public key, the bundle fails on its signature;
checked trusting the forger's key as well, each edit that touches a row still fails on
that row, because every row of every file must be covered by a signed commit.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fsm import Engine, SQLiteStore
from fsm.auditor import bundle
from fsm.auditor.export import export
from fsm.records import GENESIS
from workflows.refund import Shop, build, clerk

Files = dict[str, bytes]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Files, dict[str, bytes]]:
    """Three runs: ``big`` (₹1,800 approved and paid), ``kettle`` (a small refund that
    never asked anyone) and ``lamp`` (handed over and closed at the desk); the bundle's
    files and the deployment's public keys."""
    db = tmp_path_factory.mktemp("edits") / "runs.db"
    with SQLiteStore(str(db)) as store, Shop(str(db)) as shop:
        engine = Engine(build(shop.seed_demo()), store, clerk)
        engine.start("Order A-1002: headphones dead", user="ravi", run_id="big")
        engine.decide("big", True, "priya", "receipt checked")
        engine.start("Order A-1001: the kettle arrived broken", user="asha",
                     run_id="kettle")
        engine.start("Order A-1003: the lamp flickers", user="ravi", run_id="lamp")
        engine.take_handover("lamp", "sam")
        engine.close_handover("lamp", "sam", "resolved", "sent a new lamp")
        data = export(store, ["big", "kettle", "lamp"], lambda run: build(), now=1.0,
                      by="audrey")
        keys = dict(store.keys.public)
    out = db.parent / "evidence.zip"
    out.write_bytes(data)
    with zipfile.ZipFile(out) as z:
        return {i.filename: z.read(i) for i in z.infolist()}, keys


def _folder(files: Files, run_id: str) -> str:
    manifest = json.loads(files["manifest.json"])
    return next(r["folder"] for r in manifest["runs"] if r["run_id"] == run_id)


def _rows(files: Files, name: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in files[name].decode().splitlines() if line]


def _put(files: Files, name: str, rows: list[dict]) -> None:  # type: ignore[type-arg]
    files[name] = "".join(bundle.canonical(r) + "\n" for r in rows).encode()


def _edit_rows(run_id: str, name: str, change: Callable[[list[dict]], None]  # type: ignore[type-arg]
               ) -> Callable[[Files], None]:
    def edit(files: Files) -> None:
        path = f"{_folder(files, run_id)}/{name}"
        rows = _rows(files, path)
        change(rows)
        _put(files, path, rows)
    return edit


def _refund(rows: list[dict]) -> dict:  # type: ignore[type-arg]
    return next(r for r in rows if r["tool"] == "refund_item")


def _amount(rows: list[dict]) -> None:  # type: ignore[type-arg]
    r = _refund(rows)
    r["args"]["amount_paise"] = 18
    r["result"]["amount_paise"] = 18


def _tool(rows: list[dict]) -> None:  # type: ignore[type-arg]
    _refund(rows)["tool"] = "send_reply"


def _extra_refund(rows: list[dict]) -> None:  # type: ignore[type-arg]
    rows.append({**_refund(rows), "key": "big:99", "step": 99})


def _approval_never_asked(files: Files) -> None:
    (asked,) = _rows(files, f"{_folder(files, 'big')}/approvals.jsonl")
    _put(files, f"{_folder(files, 'kettle')}/approvals.jsonl",
         [{**asked, "run_id": "kettle", "approval_id": "forged1"}])


def _message(rows: list[dict]) -> None:  # type: ignore[type-arg]
    rows.append({"role": "assistant", "final": "Your refund of ₹1,800 is on its way."})


def _status(files: Files) -> None:
    path = f"{_folder(files, 'big')}/run.json"
    meta = json.loads(files[path])
    meta["status"] = "handed_over"
    files[path] = json.dumps(meta).encode()


def _exporter(files: Files) -> None:
    manifest = json.loads(files["manifest.json"])
    manifest["exported_by"], manifest["exported_at"] = "mallory", "2020-01-01 00:00:00Z"
    files["manifest.json"] = json.dumps(manifest).encode()


def _desk(rows: list[dict]) -> None:  # type: ignore[type-arg]
    rows[0]["taken_by"], rows[0]["note"] = "mallory", "refunded in cash"


def _duplicate_key(files: Files) -> None:
    path = f"{_folder(files, 'big')}/events.jsonl"
    lines = files[path].decode().splitlines()
    i = next(i for i, line in enumerate(lines) if '"kind":"decision"' in line)
    lines[i] = lines[i].replace('"reviewer":', '"reviewer":"mallory","reviewer":', 1)
    files[path] = ("\n".join(lines) + "\n").encode()


def _extra_view(rows: list[dict]) -> None:  # type: ignore[type-arg]
    rows.append({**rows[-1], "step": 99})


def _rewritten_chain(files: Files) -> None:
    """The decision's reviewer changed, and the chain, the run row and the manifest's
    head made again to match."""
    folder = _folder(files, "big")
    events = _rows(files, f"{folder}/events.jsonl")
    prev = GENESIS
    for e in events:
        if e["kind"] == "decision":
            e["reviewer"] = "mallory"
        e["prev_hash"] = prev
        body = {k: v for k, v in e.items() if k != "hash"}
        e["hash"] = prev = bundle.sha256(prev + bundle.canonical(body))
    _put(files, f"{folder}/events.jsonl", events)
    meta = json.loads(files[f"{folder}/run.json"])
    meta["log_head"] = prev
    files[f"{folder}/run.json"] = json.dumps(meta).encode()
    manifest = json.loads(files["manifest.json"])
    next(r for r in manifest["runs"] if r["run_id"] == "big")["head"] = prev
    files["manifest.json"] = json.dumps(manifest).encode()


def _covered_message(rows: list[dict]) -> None:  # type: ignore[type-arg]
    rows[0]["content"] = "Order A-1002: refund me ₹18,000"


EDITS = [
    pytest.param(_edit_rows("big", "effects.jsonl", _amount), True, id="amount"),
    pytest.param(_edit_rows("big", "effects.jsonl", _tool), True, id="effect-tool"),
    pytest.param(_edit_rows("big", "effects.jsonl", _extra_refund), True, id="extra-refund"),
    pytest.param(_approval_never_asked, True, id="approval-never-asked"),
    pytest.param(_edit_rows("big", "transcript.jsonl", _message), True,
                 id="transcript-appended"),
    pytest.param(_status, True, id="run-json-status"),
    pytest.param(_exporter, False, id="manifest-exporter-and-time"),
    pytest.param(_edit_rows("lamp", "handovers.jsonl", _desk), True, id="desk-rows"),
    pytest.param(_duplicate_key, True, id="duplicate-json-key"),
    pytest.param(_edit_rows("big", "views.jsonl", _extra_view), True, id="extra-view"),
    pytest.param(_rewritten_chain, True, id="rewritten-chain"),
    pytest.param(_edit_rows("big", "transcript.jsonl", _covered_message), True,
                 id="covered-message"),
]


def _forged(files: Files, edit: Callable[[Files], None], out: Path) -> tuple[Path, str, bytes]:
    """The bundle with ``edit`` made, the manifest's file hashes recomputed and the
    manifest signed again by the forger; its path and the forger's key."""
    files = dict(files)
    edit(files)
    manifest = json.loads(files["manifest.json"])
    manifest["files"] = {n: bundle.sha256(d) for n, d in sorted(files.items())
                         if n != "manifest.json"}
    forger = Ed25519PrivateKey.generate()
    public = forger.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    kid = bundle.sha256(public)[:16]
    manifest["key"] = {"id": kid, "public": public.hex()}
    manifest["signature"] = forger.sign(bundle.signed_part(manifest)).hex()
    files["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return out, kid, public


def test_the_bundle_as_exported_verifies(exported: tuple[Files, dict[str, bytes]],
                                         tmp_path: Path) -> None:
    files, keys = exported
    path, _, _ = _forged(files, lambda f: None, tmp_path / "same.zip")
    assert not bundle.verify(str(path), keys=keys).ok  # re-signed by another key
    original = tmp_path / "original.zip"
    with zipfile.ZipFile(original, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    report = bundle.verify(str(original), keys=keys)
    assert report.ok, report.text()
    assert "1 handovers" in report.text() and "1 approvals" in report.text()


@pytest.mark.parametrize(("edit", "a_row_catches_it"), EDITS)
def test_a_hand_edited_bundle_never_verifies(
        exported: tuple[Files, dict[str, bytes]], tmp_path: Path,
        edit: Callable[[Files], None], a_row_catches_it: bool) -> None:
    files, keys = exported
    path, kid, public = _forged(files, edit, tmp_path / "forged.zip")
    report = bundle.verify(str(path), keys=keys)
    assert not report.ok
    assert any(f"signed with key {kid}, which is not one of the keys given" in p
               for p in report.problems), report.text()
    # Trusting the forger's key too, the manifest verifies: the rows must still fail.
    trusting = bundle.verify(str(path), keys={**keys, kid: public})
    assert trusting.ok is not a_row_catches_it, trusting.text()
