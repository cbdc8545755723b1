"""The package's imports run one way and never in a circle.

``make check`` runs import-linter's layers contract (``pyproject.toml``); this test
adds what a layers contract does not see: circles between modules of one layer.
"""

from __future__ import annotations

import grimp


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
