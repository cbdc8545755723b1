"""The retail desk's 16 tools: τ²-bench's names and arguments, over the retail database.

Each tool runs its :mod:`~workflows.retail.operations` function in one transaction of
the database the run's store names (the ``retail`` resource), or of one given to
:func:`~workflows.retail.workflow.build`. On top of what τ²-bench's tools check:

- ``get_user_details`` shows only the authenticated customer (a gate check on the run's
  facts) and ``get_order_details`` only their orders (checked on the order's row);
- every write is bound to the proposal the customer confirmed (``confirmed_by``), and
  checked again against the policy (:func:`~workflows.retail.rules.write_problem`) on
  the rows it changes, in its own transaction; it is retry-safe, by its idempotency key;
- ``transfer_to_human_agents`` always ends the conversation (it hands the run over), and
  runs only when the customer asked for a human agent or the desk has acted or found it
  cannot (a gate check on the run's facts, :func:`~workflows.retail.rules.transfer_problem`);
- a write that fails changed nothing (each runs in one transaction its failure rolls
  back): after an earlier write succeeded, the desk reads the failure and goes on, as the
  policy lets it; the workflow does not declare ``dependent_writes``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from fsm import ToolContext, ToolSpec
from workflows.retail import rules
from workflows.retail.database import RetailDatabase
from workflows.retail.operations import WRITES, Tx

_ORDER = "the order id, such as '#W0000000' (with the '#')"
_ITEM = "an item id, such as '1008292230' (not a product id)"
_PRODUCT = "a product id, such as '6086499569' (not an item id)"
_METHOD = "a payment method id of the customer, such as 'gift_card_0000000' or " \
          "'credit_card_0000000'"


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmailArgs(_Args):
    email: str = Field(description="the customer's email, such as 'something@example.com'")


class NameZipArgs(_Args):
    first_name: str = Field(description="the customer's first name, such as 'John'")
    last_name: str = Field(description="the customer's last name, such as 'Doe'")
    zip: str = Field(description="the customer's zip code, such as '12345'")


class UserArgs(_Args):
    user_id: str = Field(description="the user id, such as 'sara_doe_496'")


class OrderArgs(_Args):
    order_id: str = Field(description=_ORDER)


class ProductArgs(_Args):
    product_id: str = Field(description=_PRODUCT)


class ItemArgs(_Args):
    item_id: str = Field(description=_ITEM)


class NoArgs(_Args):
    pass


class ExpressionArgs(_Args):
    expression: str = Field(description="an arithmetic expression of numbers, + - * /, "
                                        "parentheses and spaces, such as '2 + 2'")


class SummaryArgs(_Args):
    summary: str = Field(description="a summary of the customer's issue")


class CancelArgs(_Args):
    order_id: str = Field(description=_ORDER)
    reason: str = Field(description="'no longer needed' or 'ordered by mistake'")


class _Address(_Args):
    address1: str = Field(description="the first line of the address, such as '123 Main St'")
    address2: str = Field(description="the second line, such as 'Apt 1' or ''")
    city: str = Field(description="the city, such as 'San Francisco'")
    state: str = Field(description="the state, such as 'CA'")
    country: str = Field(description="the country, such as 'USA'")
    zip: str = Field(description="the zip code, such as '12345'")


class OrderAddressArgs(_Address):
    order_id: str = Field(description=_ORDER)


class UserAddressArgs(_Address):
    user_id: str = Field(description="the user id, such as 'sara_doe_496'")


class PaymentArgs(_Args):
    order_id: str = Field(description=_ORDER)
    payment_method_id: str = Field(description=_METHOD)


class SwapArgs(_Args):
    order_id: str = Field(description=_ORDER)
    item_ids: list[str] = Field(description="the item ids to change; may repeat an id")
    new_item_ids: list[str] = Field(description="the new item ids, position by position: "
                                                "each a variant of the same product")
    payment_method_id: str = Field(description=_METHOD + ", to pay or receive the price "
                                                         "difference")


class ReturnArgs(_Args):
    order_id: str = Field(description=_ORDER)
    item_ids: list[str] = Field(description="the item ids to return; may repeat an id")
    payment_method_id: str = Field(description="where the refund goes: the original payment "
                                               "method, or a gift card of the customer")


#: tool → (arguments, what the model reads about it)
SIGNATURES: dict[str, tuple[type[BaseModel], str]] = {
    "find_user_id_by_email": (EmailArgs, "Find the customer's user id by email."),
    "find_user_id_by_name_zip": (NameZipArgs, "Find the customer's user id by first name, "
                                              "last name and zip code (when the email is "
                                              "not known)."),
    "get_user_details": (UserArgs, "The authenticated customer's profile: address, email, "
                                   "payment methods and order ids."),
    "get_order_details": (OrderArgs, "The status and details of an order of the customer."),
    "get_product_details": (ProductArgs, "A product and all its variant items."),
    "get_item_details": (ItemArgs, "One variant item: options, availability, price."),
    "list_all_product_types": (NoArgs, "The name and product id of every product type."),
    "calculate": (ExpressionArgs, "Calculate an arithmetic expression."),
    "transfer_to_human_agents": (SummaryArgs, "Transfer the customer to a human agent with a "
                                              "summary; the conversation ends here."),
    "cancel_pending_order": (CancelArgs, "Cancel a pending order; the payment is refunded."),
    "modify_pending_order_address": (OrderAddressArgs, "Change a pending order's shipping "
                                                       "address."),
    "modify_pending_order_payment": (PaymentArgs, "Pay a pending order with another payment "
                                                  "method of the customer."),
    "modify_pending_order_items": (SwapArgs, "Change items of a pending order to other "
                                             "variants of the same products (once per order)."),
    "return_delivered_order_items": (ReturnArgs, "Return items of a delivered order."),
    "exchange_delivered_order_items": (SwapArgs, "Exchange items of a delivered order for "
                                                 "other variants of the same products."),
    "modify_user_address": (UserAddressArgs, "Change the customer's default address."),
}


class DatabaseSource(Protocol):
    def get(self, ctx: ToolContext) -> RetailDatabase: ...


def _user(ctx: ToolContext) -> str | None:
    user = ctx.facts.get("user_id")
    return user if isinstance(user, str) else None


def _runner(source: DatabaseSource, name: str) -> Callable[[BaseModel, ToolContext], Any]:
    def run(args: BaseModel, ctx: ToolContext) -> Any:
        values = args.model_dump()
        check: Callable[[Tx], None] | None = None
        if name in WRITES:
            def check(tx: Tx) -> None:
                rules.write_problem(tx, _user(ctx), name, values)
        elif name in ("get_user_details", "get_order_details"):
            def check(tx: Tx) -> None:
                rules.read_problem(tx, _user(ctx), name, values)
        return source.get(ctx).call(name, values, key=ctx.key, check=check)

    run.__qualname__ = f"retail.{name}"
    return run


# -- what a run remembers -----------------------------------------------------------------

def _found(args: BaseModel, result: Any, facts: Any) -> dict[str, Any]:
    # One customer per conversation: the first user found is the one served.
    return {} if facts.get("user_id") else {"user_id": result}


def _profile(args: BaseModel, result: Any, facts: Any) -> dict[str, Any]:
    return {"gift_cards": rules.gift_cards(result),
            "payment_methods": rules.payment_methods(result)}


def _product(args: BaseModel, result: Any, facts: Any) -> dict[str, Any]:
    if not isinstance(result, dict):
        return {}
    return {"variants": {**(facts.get("variants") or {}), **rules.variants(result)}}


def _order(args: BaseModel, result: Any, facts: Any) -> dict[str, Any]:
    if not isinstance(result, dict) or "order_id" not in result:
        return {}  # modify_user_address returns the user
    orders = dict(facts.get("orders") or {})
    orders[result["order_id"]] = rules.order_summary(result)
    return {"orders": orders}


def _written(args: BaseModel, result: Any, facts: Any) -> dict[str, Any]:
    return {**_order(args, result, facts), "writes_done": int(facts.get("writes_done") or 0) + 1}


def _transfer_allowed(args: Any, facts: Any) -> str | None:
    return rules.transfer_problem(facts)


def _checks_user(args: Any, facts: Any) -> str | None:
    if args.user_id != facts.get("user_id"):
        return (f"user {args.user_id!r} is not the authenticated customer "
                f"{facts.get('user_id')!r}; the policy shows only their own details")
    return None


def extras(name: str) -> dict[str, Any]:
    """The :class:`~fsm.ToolSpec` fields of tool ``name`` besides its function and
    arguments: what it remembers and fires, its checks, and whether it writes."""
    if name.startswith("find_user_id"):
        return {"remember": _found, "emits": lambda r: "authenticated",
                "emits_events": ("authenticated",)}
    if name == "get_user_details":
        return {"remember": _profile, "check": _checks_user}
    if name == "get_order_details":
        return {"remember": _order}
    if name == "get_product_details":
        return {"remember": _product}
    if name == "transfer_to_human_agents":
        return {"emits": lambda r: "transferred", "emits_events": ("transferred",),
                "always_emits": True, "tags": frozenset({"hands_over"}),
                "check": _transfer_allowed}
    if name in WRITES:
        return {"write": True, "retry_safe": True, "confirmed_by": "proposal",
                "remember": _written, "emits": lambda r: "written",
                "emits_events": ("written",), "tags": frozenset({"changes_orders"})}
    return {}


def tools(source: DatabaseSource) -> list[ToolSpec]:
    """The 16 tools, each over the database ``source`` gives a run."""
    return [ToolSpec(name, _runner(source, name), description, model, **extras(name))
            for name, (model, description) in SIGNATURES.items()]
