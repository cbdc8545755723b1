"""The inbox's diagrams are titled with their own run, whatever its id."""

from __future__ import annotations

import html
import re

import pytest

from fsm import Engine, MemoryStore
from fsm.web.pages import _RUN, Diagrams
from workflows.refund import Shop, build, clerk


@pytest.mark.parametrize("run_id", ["r7", "run-with-dashes-1", "a/b <c> & d", "ünï"])
def test_each_diagram_is_titled_with_its_run_id(run_id: str) -> None:
    with Shop(":memory:") as shop:
        store, spec = MemoryStore(), build(shop.seed_demo())
        Engine(spec, store, clerk).start("Order A-1002: headphones dead", user="ravi",
                                         run_id=run_id)
        other = "other-run"
        Engine(spec, store, clerk).start("Order A-1002: headphones dead", user="ravi",
                                         run_id=other)
        diagrams = Diagrams()
        first = diagrams.svg(spec, run_id, store.events(run_id))
        second = diagrams.svg(spec, other, store.events(other))  # the same path: one layout
    assert _RUN not in first and _RUN not in second
    titles = [html.unescape(t) for t in re.findall(r"workflow refund — run ([^<]*)<", first)]
    assert titles == [run_id]
    assert html.unescape(re.findall(r"workflow refund — run ([^<]*)<", second)[0]) == other
