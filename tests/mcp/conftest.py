"""Each test's MCP servers are stopped when it ends: a test process (an xdist worker runs
many tests) keeps no server of a test that is over."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fsm.adapters.mcp import close_all


@pytest.fixture(autouse=True)
def _servers_stopped() -> Iterator[None]:
    yield
    close_all()
