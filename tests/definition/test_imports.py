"""The package's imports run one way and never in a circle.

``make check`` runs import-linter's layers contract (``pyproject.toml``); this test
adds what a layers contract does not see: circles between modules of one layer.
"""

from __future__ import annotations

import importlib
import sys

import grimp
import pytest


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others."""
    groups = set()
    for m in graph.modules:
        both = graph.find_upstream_modules(m) & graph.find_downstream_modules(m)
        if both:
            groups.add(tuple(sorted(both | {m})))
    return sorted(list(g) for g in groups)


def test_no_module_of_fsm_imports_itself_in_a_circle() -> None:
    graph = grimp.build_graph("fsm")
    # The package's __init__ re-exports the public API: it is the top, not a cycle.
    for imported in graph.find_modules_directly_imported_by("fsm"):
        graph.remove_import(importer="fsm", imported=imported)
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for m in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(m)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert _circles(graph) == [["a.x", "a.y"]]


#: Modules that moved into a folder of their kind, and where they went.
MOVED = {
    **{m: f"definition.{m}" for m in ("spec", "checks", "conversation_checks", "machine",
                                      "guards", "tools", "versions", "registry",
                                      "presentation", "money", "sources")},
    **{m: f"observability.{m}" for m in ("hooks", "otel", "telemetry", "metrics")},
    "customer": "records.conversation",
    "transcript": "records.transcript",
    "doctor": "cli.system.doctor",
    "faults": "testing.faults",
    **{f"store.{m}": f"store._{m}" for m in ("columns", "statements", "dialect")},
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_s_old_name_still_works_with_a_warning(old: str) -> None:
    new = importlib.import_module(f"fsm.{MOVED[old]}")
    sys.modules.pop(f"fsm.{old}", None)
    with pytest.warns(DeprecationWarning, match=rf"fsm\.{old} moved to fsm\.{MOVED[old]};"):
        shim = importlib.import_module(f"fsm.{old}")
    public = getattr(new, "__all__", [n for n in vars(new) if not n.startswith("_")])
    assert public and all(getattr(shim, n) is getattr(new, n) for n in public)
    if old.startswith("store."):  # the stores' insides: every name, not only __all__
        assert all(getattr(shim, n) is getattr(new, n) for n in vars(new)
                   if not n.startswith("_"))


def test_nothing_in_fsm_imports_a_moved_module_by_its_old_name() -> None:
    graph = grimp.build_graph("fsm")
    importers = {old: graph.find_modules_that_directly_import(f"fsm.{old}") for old in MOVED}
    assert {old: found for old, found in importers.items() if found} == {}


def test_a_worker_rebuilding_a_policy_that_is_no_model_does_not_load_the_openai_sdk() -> None:
    """The adapters package gives its names when first read: a worker that rebuilds a
    ``module:attr`` policy (the fleet's) does not pay for the OpenAI SDK, and a model's
    policy still finds it."""
    import subprocess

    probe = (
        "import sys\n"
        "from fsm.worker import _policy\n"
        "from workflows.refund import Shop, build\n"
        "policy = _policy('workflows.refund', build(Shop(':memory:')), None,\n"
        "                 {'policy': 'workflows.refund.fleet:slow_clerk'}, None, False)\n"
        "print(policy.__name__, 'openai' in sys.modules)\n"
        "import fsm.adapters\n"
        "print(fsm.adapters.OpenAIPolicy.__module__, 'openai' in sys.modules)\n"
        "print(sorted({getattr(fsm.adapters, n).__module__.split('.')[-1]\n"
        "              for n in fsm.adapters.__all__ if n != 'DEFAULT_TIMEOUT'}))\n"
        "print(fsm.adapters.translate.__name__, hasattr(fsm.adapters, 'nothing'))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out == ["slow_clerk False", "fsm.adapters.openai True",
                   "['errors', 'openai', 'textcalls', 'translate']",
                   "fsm.adapters.translate False"]
