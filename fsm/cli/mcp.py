"""``fsm mcp serve``: a workflow's runs served over MCP (see :mod:`fsm.adapters.mcp_serve`)."""

from __future__ import annotations

import typer

from .app import DB_HELP
from .app import app as root

DbOpt = typer.Option(None, "--db", help=DB_HELP)

app = typer.Typer(help="Serve a workflow's runs to MCP hosts.", no_args_is_help=True)
root.add_typer(app, name="mcp")


@app.command("serve")
def serve_cmd(
    workflow: str = typer.Argument(..., help="a registered workflow or module:attr"),
    db: str | None = DbOpt,
    http: int | None = typer.Option(None, "--http", metavar="PORT",
                                    help="serve streamable HTTP on 127.0.0.1:PORT (/mcp) "
                                    "instead of stdio"),
) -> None:
    """Serve WORKFLOW's runs over MCP (stdio by default): an MCP host starts and drives
    runs through the same gate, and the CLI, the inbox and fsm audit see the same runs.
    The host lists the current state's tools, plus start, continue, advance and reply."""
    import anyio

    from fsm.adapters.mcp_serve import serve_http, serve_stdio
    from fsm.cli.context import store_for
    from fsm.definition.registry import load_workflow

    spec = load_workflow(workflow)
    with store_for(db) as store:
        if http is not None:
            serve_http(spec, store, ref=workflow, port=http)
        else:
            anyio.run(lambda: serve_stdio(spec, store, ref=workflow))
