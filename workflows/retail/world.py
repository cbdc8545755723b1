"""What the violation generators read of a task: the fresh database, the task's customer
and their orders, and arguments τ²-bench's tools accept for a write to an order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.retail.database import MemoryRetail
from workflows.retail.replay import Move, customer_of, identify

#: A new address, for the writes that take one.
ADDRESS = {"address1": "1 Violation Way", "address2": "", "city": "Springfield",
            "state": "IL", "country": "USA", "zip": "62701"}


class World:
    """What the generators read: the fresh database, the customer, their orders."""

    def __init__(self, task: Mapping[str, Any]) -> None:
        self.db = MemoryRetail()
        self.task = task
        self.user: str = customer_of(task, self.db) or ""
        self.profile = self.db.call("get_user_details", {"user_id": self.user})
        self.orders = [self.db.call("get_order_details", {"order_id": o})
                       for o in self.profile["orders"]]
        self._everything: dict[str, Any] | None = None

    @property
    def everything(self) -> dict[str, Any]:
        """The whole fresh database, in τ²-bench's shape (read once)."""
        if self._everything is None:
            self._everything = self.db.dump()
        return self._everything

    def order(self, status: str, prefer: str | None = None) -> dict[str, Any] | None:
        mine = [o for o in self.orders if o["status"] == status]
        return next((o for o in mine if o["order_id"] == prefer), mine[0] if mine else None)

    def swap(self, order: Mapping[str, Any], skip: int = 0) -> tuple[str, str] | None:
        """An item of ``order`` and another available variant of its product."""
        options = []
        for item in order["items"]:
            product = self.db.call("get_product_details", {"product_id": item["product_id"]})
            for item_id, v in product["variants"].items():
                if item_id != item["item_id"] and v["available"]:
                    options.append((item["item_id"], item_id))
        return options[skip] if len(options) > skip else None

    def write_for(self, tool: str, order: Mapping[str, Any], skip: int = 0
                  ) -> dict[str, Any] | None:
        """Arguments τ²-bench's ``tool`` accepts for ``order``, or ``None``."""
        paid = order["payment_history"][0]["payment_method_id"]
        oid = order["order_id"]
        if tool == "cancel_pending_order":
            return {"order_id": oid, "reason": "no longer needed"}
        if tool == "modify_pending_order_address":
            return {"order_id": oid, **ADDRESS}
        if tool == "modify_pending_order_payment":
            user = self.db.call("get_user_details", {"user_id": order["user_id"]})
            other = [m for m in user["payment_methods"] if m != paid]
            return {"order_id": oid, "payment_method_id": other[0]} if other else None
        if tool == "return_delivered_order_items":
            return {"order_id": oid, "item_ids": [order["items"][0]["item_id"]],
                    "payment_method_id": paid}
        swap = self.swap(order, skip)
        if swap is None:
            return None
        return {"order_id": oid, "item_ids": [swap[0]], "new_item_ids": [swap[1]],
                "payment_method_id": paid}

    def identify(self) -> Move:
        """Authentication of the task's customer, by name and zip."""
        return identify(self.db, self.user)


def other_args(world: World, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` with one argument changed, as an agent might after the customer's yes
    (still arguments τ²-bench's tool accepts, where the data allows)."""
    changed = dict(args)
    if tool == "cancel_pending_order":
        changed["reason"] = ("ordered by mistake" if args["reason"] == "no longer needed"
                             else "no longer needed")
    elif "zip" in args:
        changed["zip"] = "00000" if args["zip"] != "00000" else "99999"
    elif "new_item_ids" in args:
        changed["new_item_ids"] = _other_variant(world, args)
    elif tool == "return_delivered_order_items":
        changed.update(_other_return(world, args))
    else:
        order = world.db.call("get_order_details", {"order_id": args["order_id"]})
        used = {args["payment_method_id"], order["payment_history"][0]["payment_method_id"]}
        others = [m for m in world.profile["payment_methods"] if m not in used]
        changed["payment_method_id"] = others[0] if others else "paypal_0000000"
    return changed


def _other_variant(world: World, args: Mapping[str, Any]) -> list[str]:
    """The new items with the first one swapped for another variant of its product."""
    new = list(args["new_item_ids"])
    order = world.db.call("get_order_details", {"order_id": args["order_id"]})
    item = next((i for i in order["items"] if i["item_id"] == args["item_ids"][0]), None)
    if item is not None:
        product = world.db.call("get_product_details", {"product_id": item["product_id"]})
        for item_id, v in product["variants"].items():
            if v["available"] and item_id not in (new[0], item["item_id"]):
                return [item_id, *new[1:]]
    return [*new[1:], new[0]] if len(new) > 1 else [args["item_ids"][0]]


def _other_return(world: World, args: Mapping[str, Any]) -> dict[str, Any]:
    """Fewer or other items, or the refund to a gift card."""
    items = list(args["item_ids"])
    if len(items) > 1:
        return {"item_ids": items[:-1]}
    order = world.db.call("get_order_details", {"order_id": args["order_id"]})
    others = [i["item_id"] for i in order["items"] if i["item_id"] not in items]
    if others:
        return {"item_ids": others[:1]}
    cards = [m for m, d in world.profile["payment_methods"].items()
             if d["source"] == "gift_card" and m != args["payment_method_id"]]
    return {"payment_method_id": cards[0] if cards else "gift_card_0000000"}
