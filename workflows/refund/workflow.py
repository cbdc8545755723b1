"""The refund workflow: tables, guards, payloads and tools."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from fsm import Currency, Guard, Presentation, ToolContext, ToolSpec, WorkflowSpec, define_workflow
from workflows.refund.shop import DAY, AnyShop, PostgresShop, Shop, open_shop

TRANSITIONS = {
    "collecting":        {"details_complete": "verifying"},
    "verifying":         {"verified": "deciding", "cannot_verify": "handed_over"},
    "deciding":          {"small_refund": "refunding", "large_refund": "awaiting_approval",
                          "no_refund": "replying"},
    "awaiting_approval": {"approved": "refunding", "declined": "replying",
                          "expired": "handed_over"},
    "refunding":         {"refund_ok": "replying", "refund_failed": "handed_over"},
    "replying":          {"sent": "done"},
}

TOOLS_BY_STATE = {
    "collecting": ["get_order"],
    "verifying":  ["get_order", "get_policy"],
    "refunding":  ["refund_item"],          # the only state in which money can move
    "replying":   ["send_reply"],
}

HUMAN_EVENTS = {"approved", "declined", "expired"}

#: Refunds above this need a person's approval (₹500, in paise).
APPROVAL_LIMIT_PAISE = 50_000
#: Refund window, from delivery.
REFUND_WINDOW_DAYS = 30

INSTRUCTIONS = {
    "collecting": "Find the order the customer means and fetch it with get_order, then "
                  "fire details_complete.",
    "verifying": "Check the refund policy of the order with get_policy. Fire verified if the "
                 "policy says eligible, cannot_verify otherwise.",
    "deciding": "Decide: small_refund or large_refund with the item and the amount in paise "
                "(at most the refundable amount), or no_refund with a reason.",
    "refunding": "Call refund_item with exactly the decided order, item and amount.",
    "replying": "Write the customer a short, polite reply with send_reply.",
}

SYSTEM_PROMPT = (
    "You are a refund clerk for an online shop. Work one step at a time with the tools "
    "you are given; fire workflow events with the advance tool. Amounts are integer paise "
    "(₹1 = 100 paise)."
)


class ShopSource(Protocol):
    def get(self, ctx: ToolContext) -> AnyShop: ...


class _Fixed:
    """One shop for every run (tests build the workflow around their own shop)."""

    def __init__(self, shop: AnyShop) -> None:
        self.shop = shop

    def get(self, ctx: ToolContext) -> AnyShop:
        return self.shop


class _Resource:
    """The shop the runtime opened from the run's database location."""

    def get(self, ctx: ToolContext) -> AnyShop:
        shop: AnyShop = ctx.resource("shop")
        return shop


def demo_shop(location: str) -> AnyShop:
    """The demo shop in the same database as the runs, in tables of its own."""
    return open_shop(location or ":memory:").seed_demo()


def rupees(paise: int) -> str:
    """``180000`` → ``"₹1,800"``; ``35050`` → ``"₹350.50"``."""
    whole, rest = divmod(paise, 100)
    return f"₹{whole:,}" + (f".{rest:02d}" if rest else "")


def _summary(tool: str | None, args: dict[str, Any], facts: Mapping[str, Any]) -> str:
    """``refund ₹12,000 for the headphones of order A-1002``."""
    amount = args.get("amount_paise")
    money = rupees(amount) if isinstance(amount, int) else "?"
    order = facts.get("order") or {}
    what = order.get("item_name") or args.get("item_id") or "an item"
    order_id = order.get("order_id") or args.get("order_id")
    return f"refund {money} for the {what}" + (f" of order {order_id}" if order_id else "")


def lower_amount(tool: str | None, args: dict[str, Any],
                 changes: dict[str, Any]) -> dict[str, Any]:
    """A reviewer may approve a lower refund, never a higher one, and change nothing else."""
    other = sorted(set(changes) - {"amount_paise"})
    if other:
        raise ValueError(f"only amount_paise may be changed, not {', '.join(other)}")
    new = changes.get("amount_paise", args.get("amount_paise"))
    asked = args.get("amount_paise")
    if not isinstance(new, int) or isinstance(new, bool) or not isinstance(asked, int):
        raise ValueError("amount_paise must be a whole number of paise")
    if not 0 < new <= asked:
        raise ValueError(f"the amount may only be lowered: between 1 and {asked} paise "
                         f"({rupees(asked)}), not {new}")
    return {**args, "amount_paise": new}


def _subject(tool: str | None, args: dict[str, Any], facts: Mapping[str, Any]) -> str | None:
    """``order A-1002``: two refund requests of one order are about the same thing."""
    order_id = (facts.get("order") or {}).get("order_id") or args.get("order_id")
    return f"order {order_id}" if order_id else None


#: Amounts are kept in paise and typed and read in rupees.
RUPEES = Currency(symbol="₹", digits=2, minor="paise", major="rupees")

PRESENTATION = Presentation(
    summary=_summary,
    amount=lambda tool, args: args.get("amount_paise"),
    currency=RUPEES,
    amount_field="amount_paise",
    subject=_subject,
    written={"refund_item": "refunded", "send_reply": "answered"},
)


# -- arguments and payloads -----------------------------------------------------------

class OrderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str = Field(description="the order id, e.g. A-1001", pattern=r"^[A-Z]-\d{4}$")


class RefundArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str = Field(description="the order id", pattern=r"^[A-Z]-\d{4}$")
    item_id: str = Field(description="the item to refund", min_length=1)
    amount_paise: StrictInt = Field(description="the amount in paise", gt=0)


class ReplyArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="the reply to the customer", min_length=1, max_length=2000)


class RefundDecision(BaseModel):
    """The refund the workflow decided on; ``refund_item`` must match it exactly."""

    model_config = ConfigDict(extra="forbid")
    item_id: str = Field(description="the item to refund", min_length=1)
    amount_paise: StrictInt = Field(description="the refund in paise", gt=0)


class NoRefund(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(description="why no refund is given", min_length=1)


# -- guards ---------------------------------------------------------------------------

def _decision_ok(facts: Any, payload: dict[str, Any], *, large: bool) -> bool:
    policy = facts.get("policy") or {}
    order = facts.get("order") or {}
    amount = payload.get("amount_paise", 0)
    if policy.get("order_id") != order.get("order_id"):
        return False
    if payload.get("item_id") != order.get("item_id") or not policy.get("eligible"):
        return False
    if amount > policy.get("refundable_paise", 0):
        return False
    return amount > APPROVAL_LIMIT_PAISE if large else 0 < amount <= APPROVAL_LIMIT_PAISE


GUARDS = {
    "details_complete": Guard("the order was fetched", lambda f, p: "order" in f),
    "verified": Guard("get_policy said eligible",
                      lambda f, p: bool((f.get("policy") or {}).get("eligible"))),
    "cannot_verify": Guard("get_policy said not eligible",
                           lambda f, p: "policy" in f and not f["policy"].get("eligible")),
    "small_refund": Guard("amount ≤ ₹500 and ≤ refundable",
                          lambda f, p: _decision_ok(f, p, large=False),
                          establishes=("amount_within_limit",)),
    "large_refund": Guard("amount > ₹500 and ≤ refundable",
                          lambda f, p: _decision_ok(f, p, large=True),
                          establishes=("amount_above_limit",)),
}

PAYLOADS: dict[str, type[BaseModel]] = {
    "small_refund": RefundDecision, "large_refund": RefundDecision, "no_refund": NoRefund,
}

RECORDS = {"small_refund": "decision", "large_refund": "decision", "no_refund": "no_refund"}


# -- tools ----------------------------------------------------------------------------

def _tools(shop: ShopSource) -> list[ToolSpec]:
    def get_order(args: OrderArgs, ctx: ToolContext) -> dict[str, Any]:
        order = shop.get(ctx).order(args.order_id)
        if order is None:
            raise LookupError(f"no order {args.order_id}")
        if order["customer"] != ctx.user:
            return {"order_id": args.order_id, "customer_matches": False,
                    "note": "this order belongs to another customer; its details are hidden"}
        return {"order_id": args.order_id, "customer_matches": True,
                "item_id": order["item_id"], "item_name": order["item_name"],
                "price_paise": order["price_paise"]}

    def get_policy(args: OrderArgs, ctx: ToolContext) -> dict[str, Any]:
        s = shop.get(ctx)
        order = s.order(args.order_id)
        if order is None:
            raise LookupError(f"no order {args.order_id}")
        if order["customer"] != ctx.user:
            return {"order_id": args.order_id, "eligible": False, "refundable_paise": 0,
                    "reason": "the order does not belong to this customer"}
        days = _days_since_delivery(s, order)
        within = days <= REFUND_WINDOW_DAYS
        return {"order_id": args.order_id, "eligible": True, "within_window": within,
                "days_since_delivery": days, "window_days": REFUND_WINDOW_DAYS,
                "refundable_paise": order["price_paise"] if within else 0,
                "approval_limit_paise": APPROVAL_LIMIT_PAISE}

    def refund_item(args: RefundArgs, ctx: ToolContext) -> dict[str, Any]:
        assert ctx.key is not None
        s = shop.get(ctx)
        # The refundable amount is read again at payment time, not trusted from the run.
        refundable = _refundable_now(s, args.order_id, ctx.user)
        if args.amount_paise > refundable:
            raise ValueError(f"the refund exceeds what is refundable now "
                             f"({rupees(refundable)})")
        return s.pay(ctx.key, args.order_id, args.item_id, args.amount_paise)

    def send_reply(args: ReplyArgs, ctx: ToolContext) -> dict[str, Any]:
        assert ctx.key is not None
        return shop.get(ctx).send(ctx.key, ctx.user, args.text)

    return [
        ToolSpec("get_order", get_order, "Fetch an order of the customer.", OrderArgs,
                 remember=_remember_order),
        ToolSpec("get_policy", get_policy, "Refund policy for an order: eligibility, window, "
                 "refundable amount in paise.", OrderArgs,
                 remember=_remember_policy),
        ToolSpec("refund_item", refund_item, "Refund one item through the payment gateway.",
                 RefundArgs, write=True, retry_safe=True, lookup=_payment_of(shop),
                 check=_matches_decision,
                 emits=lambda r: "refund_ok" if r.get("status") == "ok" else "refund_failed",
                 emits_events=("refund_ok", "refund_failed"), tags=frozenset({"moves_money"})),
        ToolSpec("send_reply", send_reply, "Send the customer a reply.", ReplyArgs,
                 write=True, retry_safe=True, emits=lambda r: "sent", emits_events=("sent",)),
    ]


def _payment_of(shop: ShopSource) -> Any:
    """The gateway answers a known key with its payment: recovery asks it, not the row."""
    def paid(key: str, ctx: ToolContext) -> dict[str, Any] | None:
        return shop.get(ctx).payment(key)
    return paid


def _refundable_now(shop: AnyShop, order_id: str, customer: str) -> int:
    order = shop.order(order_id)
    if order is None or order["customer"] != customer:
        return 0
    within = _days_since_delivery(shop, order) <= REFUND_WINDOW_DAYS
    return int(order["price_paise"]) if within else 0


def _days_since_delivery(shop: AnyShop, order: dict[str, Any]) -> int:
    """Whole days since the order was delivered, by the shop's clock."""
    return int((shop.clock() - order["delivered_at"]) // DAY)


def _remember_order(args: OrderArgs, result: dict[str, Any], facts: Any) -> dict[str, Any]:
    if "order" in facts and facts["order"].get("order_id") != args.order_id:
        return {}  # the first order fetched is the one the run is about
    return {"order": result}


def _remember_policy(args: OrderArgs, result: dict[str, Any], facts: Any) -> dict[str, Any]:
    # Only the policy of the run's order counts: another order's refundable amount must
    # not become the limit for this one.
    if (facts.get("order") or {}).get("order_id") != args.order_id:
        return {}
    return {"policy": result}


def _matches_decision(args: RefundArgs, facts: Any) -> str | None:
    decision = facts.get("decision")
    order = facts.get("order") or {}
    if not decision:
        return "no refund has been decided"
    wanted = {"order_id": order.get("order_id"), **decision}
    got = args.model_dump()
    if got != wanted:
        return f"arguments must equal the decided refund {wanted}"
    return None


def definition(shop: AnyShop | ShopSource | None = None) -> dict[str, Any]:
    """Everything :func:`build` gives ``define_workflow`` besides the name: the tables,
    tools bound to ``shop``, hooks and invariants (variants such as the refund
    conversation start from these)."""
    source: ShopSource
    if shop is None:
        source = _Resource()
    elif isinstance(shop, Shop | PostgresShop):
        source = _Fixed(shop)
    else:
        source = shop
    from workflows.refund.invariants import INVARIANTS

    return dict(
        transitions=TRANSITIONS, tools_by_state=TOOLS_BY_STATE,
        initial="collecting", tools=_tools(source), human_events=HUMAN_EVENTS,
        guards=GUARDS, payloads=PAYLOADS, records=RECORDS, instructions=INSTRUCTIONS,
        system_prompt=SYSTEM_PROMPT, terminal={"done"}, handed_over_states={"handed_over"},
        expiry_event="expired", approval_ttl_seconds=72 * 3600,
        invariants=INVARIANTS, settings={"approval_limit_paise": APPROVAL_LIMIT_PAISE},
        presentation=PRESENTATION, resources={"shop": demo_shop}, amend=lower_amount,
        version="1",
    )


def build(shop: AnyShop | ShopSource | None = None) -> WorkflowSpec:
    """The refund workflow bound to ``shop`` (default: the shop in the database of the
    store the run is driven on, opened by the runtime as the ``shop`` resource)."""
    return define_workflow("refund", **definition(shop))
