"""The retail desk: τ²-bench's retail domain (Sierra Research, MIT licence) as tables.

See ``docs/how-to/retail.md``; the data's source and licence are in ``NOTICE.md``.
"""

from workflows.retail.live import LIVE  # what fsm shadow --live runs on
from workflows.retail.shadow import SHADOW  # how fsm shadow reads recorded agents' prose
from workflows.retail.workflow import TOOLS_BY_STATE, TRANSITIONS, build

#: The registered workflow (entry point ``fsm.workflows:retail``), over the retail tables
#: of the current database.
WORKFLOW = build()

__all__ = ["LIVE", "SHADOW", "TOOLS_BY_STATE", "TRANSITIONS", "WORKFLOW", "build"]
