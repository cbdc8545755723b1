"""The refund workflow: the first real user of fsm."""

from workflows.refund.clerk import clerk
from workflows.refund.shop import Shop
from workflows.refund.workflow import (
    APPROVAL_LIMIT_PAISE,
    TOOLS_BY_STATE,
    TRANSITIONS,
    build,
)

#: The registered workflow (entry point ``fsm.workflows:refund``), bound to the shop of
#: the current database.
WORKFLOW = build()
#: The default policy ``fsm run refund`` uses when no model or policy is given.
POLICY = clerk

__all__ = ["APPROVAL_LIMIT_PAISE", "POLICY", "TOOLS_BY_STATE", "TRANSITIONS", "WORKFLOW",
           "Shop", "build", "clerk"]
