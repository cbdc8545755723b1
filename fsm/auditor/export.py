"""Writing an evidence bundle: everything an external auditor needs about some runs, in
one zip file that :mod:`fsm.auditor.bundle` checks offline (the format:
docs/reference/bundle.md).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterable
from typing import Any

from fsm.auditor.audit import audit
from fsm.auditor.bundle import FORMAT, MANIFEST, canonical, sha256, signed_part
from fsm.auditor.diagram import extract, overlay
from fsm.auditor.render import DOT_TIMEOUT, GraphvizMissing, render, to_dot
from fsm.auditor.verify import verify
from fsm.definition.spec import WorkflowSpec
from fsm.errors import BundleError, RunNotFound
from fsm.records import utc
from fsm.signing import Keys
from fsm.store.roles import Evidence, RunReads

#: ``run -> the workflow it ran on`` (``None``: it cannot be loaded here).
SpecOf = Callable[[Any], WorkflowSpec | None]


def _jsonl(rows: Iterable[Any]) -> bytes:
    return "".join(canonical(r) + "\n" for r in rows).encode()


def _run_files(store: Evidence, run_id: str, spec: WorkflowSpec | None,
               dot_timeout: float) -> dict[str, bytes]:
    run = store.load_run(run_id)
    events = store.events(run_id)
    count, head, sig = store.signed_head(run_id)
    status, workflow = store.run_columns(run_id)
    report = audit(store, run_id)
    unsigned = [p for p in report.problems if "signed" in p]
    if unsigned:
        # The bundle's signature must not vouch for rows the deployment never signed.
        raise BundleError(f"run {run_id!r}: {unsigned[0]}; nothing was written")
    views = [store.view_record(run_id, step) for step in sorted({e.step for e in events})]
    files = {
        "run.json": json.dumps({
            "run_id": run.run_id, "workflow": workflow, "status": status,
            "definition_hash": run.definition_hash, "log_count": count, "log_head": head,
            "log_sig": sig, "snapshot": store.snapshot_text(run_id),
        }, indent=2, ensure_ascii=False, sort_keys=True).encode(),
        "events.jsonl": _jsonl({**e.body(), "hash": e.hash} for e in events),
        "transcript.jsonl": _jsonl(store.messages(run_id)),
        "views.jsonl": _jsonl(v.model_dump(mode="json") for v in views if v is not None),
        "effects.jsonl": _jsonl(e.model_dump(mode="json") for e in store.effects(run_id)),
        "approvals.jsonl": _jsonl(a.model_dump(mode="json")
                                  for a in store.approvals(run_id, pending_only=False)),
        "handovers.jsonl": _jsonl(h.model_dump(mode="json")
                                  for h in store.run_handovers(run_id)),
        "audit.json": json.dumps({"ok": report.ok, "events": report.events,
                                  "head": report.head, "problems": report.problems,
                                  "warnings": report.warnings,
                                  "forked_from": report.link.as_json()},
                                 indent=2, ensure_ascii=False).encode(),
    }
    if spec is not None:
        diagram = extract(spec, overlay(run_id, events))
        files["diagram.dot"] = to_dot(diagram).encode()
        try:
            files["diagram.svg"] = render(diagram, "svg", dot_timeout=dot_timeout)
        except GraphvizMissing:
            pass  # DOT is there; SVG needs Graphviz
    return files


def _definition_files(spec: WorkflowSpec) -> dict[str, bytes]:
    report = verify(spec)
    tables = {"definition_hash": spec.definition_hash, **spec.behaviour()}
    return {
        "tables.json": json.dumps(tables, indent=2, ensure_ascii=False, sort_keys=True,
                                  default=str).encode(),
        "verify.md": report.markdown().encode(),
        "verify.json": json.dumps({"ok": report.ok, "summary": report.summary},
                                  indent=2, ensure_ascii=False).encode(),
    }


def _signing_keys(store: RunReads) -> Keys:
    keys = store.keys
    if keys.private is None or keys.current is None:
        raise BundleError("a bundle is signed with the deployment's key, and there is no "
                          f"private key here{f' ({keys.path})' if keys.path else ''}; "
                          "nothing was written")
    return keys


def _signature(keys: Keys, data: bytes) -> str:
    assert keys.private is not None
    return keys.private.sign(data).hex()


def export(store: Evidence, run_ids: list[str], spec_of: SpecOf, *, now: float,
           by: str = "", dot_timeout: float = DOT_TIMEOUT) -> bytes:
    """The bundle of ``run_ids`` as the bytes of a zip file (its diagrams drawn by
    Graphviz within ``dot_timeout`` seconds each)."""
    if not run_ids:
        raise BundleError("name at least one run to export")
    keys = _signing_keys(store)
    files: dict[str, bytes] = {}
    runs, definitions = [], {}
    for i, run_id in enumerate(dict.fromkeys(run_ids)):
        try:
            run = store.load_run(run_id)
        except RunNotFound as exc:  # or pruned, which it says
            raise BundleError(f"{exc}; nothing was written") from None
        spec = spec_of(run)
        if spec is not None and spec.definition_hash != run.definition_hash:
            spec = None  # drawn and verified only on the definition it ran on
        folder = f"runs/{i + 1}"
        for name, data in _run_files(store, run_id, spec, dot_timeout).items():
            files[f"{folder}/{name}"] = data
        count, head = store.log_head(run_id)
        runs.append({"run_id": run_id, "folder": folder, "workflow": run.workflow,
                     "definition_hash": run.definition_hash, "status": run.status,
                     "head": head, "events": count})
        if spec is not None:
            definitions[run.definition_hash] = spec
    for digest, spec in definitions.items():
        for name, data in _definition_files(spec).items():
            files[f"definitions/{digest}/{name}"] = data
    manifest: dict[str, Any] = {
        "format": FORMAT, "exported_at": utc(now), "exported_by": by, "runs": runs,
        "definitions": sorted(definitions),
        "files": {name: sha256(data) for name, data in sorted(files.items())},
        "key": {"id": keys.current, "public": keys.public[str(keys.current)].hex()},
    }
    manifest["signature"] = _signature(keys, signed_part(manifest))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False,
                                        sort_keys=True))
        for name, data in sorted(files.items()):
            z.writestr(name, data)
    return out.getvalue()
