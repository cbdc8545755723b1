"""Each test's MCP servers are stopped when it ends: a test process (an xdist worker runs
many tests) keeps no server of a test that is over."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from fsm.adapters.mcp import McpServer


@pytest.fixture(autouse=True)
def _servers_stopped(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    made: weakref.WeakSet[McpServer] = weakref.WeakSet()  # one that goes stops itself
    init = McpServer.__init__

    def noted(self: McpServer, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.add(self)

    monkeypatch.setattr(McpServer, "__init__", noted)
    yield
    for server in list(made):
        server.close()
