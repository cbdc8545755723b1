"""Reachability, written once: a breadth-first search over any graph given as a function.

The definition checks (which states a run can reach, which can reach an end) and the
verifier (shortest counterexamples over states and monitors) both use :func:`reach`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

N = TypeVar("N", bound=Hashable)
E = TypeVar("E")


def reach(
    start: Iterable[N], step: Callable[[N], Iterable[tuple[N, E]]],
) -> dict[N, tuple[N, E] | None]:
    """Every node reachable from ``start`` → how it was first reached.

    ``step(node)`` yields ``(next node, edge)`` pairs. The result maps each reached node
    to ``(previous node, edge)`` on a shortest path to it (``None`` for a start node),
    in breadth-first order, so following the links back gives that shortest path.
    """
    parent: dict[N, tuple[N, E] | None] = {}
    queue: deque[N] = deque()
    for s in start:
        if s not in parent:
            parent[s] = None
            queue.append(s)
    while queue:
        here = queue.popleft()
        for nxt, edge in step(here):
            if nxt not in parent:
                parent[nxt] = (here, edge)
                queue.append(nxt)
    return parent


def closure(start: Iterable[N], graph: dict[N, set[N]]) -> set[N]:
    """The nodes reachable from ``start`` in ``graph`` (node → successors)."""
    return set(reach(start, lambda n: ((m, None) for m in graph.get(n, ()))))


def path_to(parent: dict[N, tuple[N, E] | None], node: N) -> tuple[E, ...]:
    """The edges of the shortest path :func:`reach` found to ``node``."""
    edges: list[E] = []
    link = parent[node]
    while link is not None:
        node, edge = link
        edges.append(edge)
        link = parent[node]
    return tuple(reversed(edges))
