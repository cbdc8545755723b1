"""How ``fsm shadow`` reads a recorded retail agent's prose (τ²-bench's retail policy).

The policy: "Before taking any action that updates the database (cancel, modify, return,
exchange), you must list the action details and obtain explicit user confirmation (yes) to
proceed." It does not say one yes covers one action only: an agent that lists several
actions and gets one yes has listed the details of each and has its yes; so one answer
may cover several writes, provided the one proposal names each of them.

**The answer** is an explicit yes when one of its parts (sentences, lines, list items,
what a colon or a dash separates) opens with a yes (``yes``, ``ok``, ``sure``, ``confirmed``,
``go ahead``, ``proceed``..., the desk's own yes phrases, possibly after ``um``, ``and`` or
``thanks``-like words), and nothing takes it back: no yes part holds ``but``, ``however``,
``instead``, ``actually``, ``except``, ``though``, ``rather``, ``wait``, ``hold on``,
``hold off``, ``never mind`` or ``not yet``, and no part after the last yes opens with one
of them or is a plain no. A yes on a condition (said after an ``if`` on the same line:
"If it has not shipped, yes, cancel it", "- If so: YES, go ahead") does not count; a reply
whose only yeses are such is *conditional*: the recording cannot say whether the condition
held, and the conversation is unmappable. A reply that opens with one of the desk's no
phrases is a no. Anything else is neither.

**The proposal** must name what the call changes, in ids (the order id; each item id, or
the item's name when no other item of the order has it; each new item id; the payment
method's id, its kind — PayPal, gift card, credit card or its last four digits — or
"original payment method" when it is the one that paid), the cancellation reason (the
policy: "the user needs to confirm the order id and the reason"), and a new address's
first line, city and zip code. The retail writes carry no amounts: what they charge or
refund follows from the items named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fsm.sandbox.shadow_rules import Answer, Mention, Seen
from workflows.retail.workflow import COURTESY_PHRASES, NO_PHRASES, YES_PHRASES

#: Words that may open a reply before its yes without changing it.
FILLERS = frozenset({("and",), ("so",), ("um",), ("uh",), ("ah",), ("oh",), ("well",),
                     ("hi",), ("hello",), ("great",), ("perfect",), ("awesome",), ("thanks",),
                     ("thank", "you")})
#: More ways of saying yes than the desk's live list: in the recording, the proposal the
#: customer answers is the agent's own text, and they answer it in their words.
MORE_YES = frozenset({("proceed",), ("please", "proceed"), ("yes", "please"),
                      ("go", "for", "it"), ("let's", "do", "it"), ("let's", "proceed"),
                      ("please", "go", "ahead")})
#: Words that take a yes back or change it.
TAKE_BACK = ("but", "however", "instead", "actually", "except", "though", "rather", "wait",
             "hold on", "hold off", "never mind", "nevermind", "not yet")


_PHRASES = sorted(YES_PHRASES | MORE_YES | COURTESY_PHRASES | FILLERS, key=len, reverse=True)


def _words(text: str) -> list[str]:
    found = re.findall(r"[\w']+", text.lower().replace("\u2019", "'"))
    return [w for w in (f.strip("'") for f in found) if w]


#: Where one part of a reply ends: a sentence's end, a line break, a colon, a semicolon,
#: a dash or an ellipsis.
_BREAKS = re.compile(r"[.!?\n;:\u2014\u2013\u2026]+|\s-\s")
#: A list marker opening a part ("-", "•", "1)", "2.", "A.", "b)").
_MARKER = re.compile(r"^\s*(?:[-*\u2022]+|\(?[0-9]{1,2}[.)]|\(?[a-dA-D][.)])\s+")


def parts(text: str) -> list[list[str]]:
    """The reply's parts (see ``_BREAKS``), each as its words, list markers left out."""
    return [words for _, words in _lined_parts(text)]


def _lined_parts(text: str) -> list[tuple[int, list[str]]]:
    """Each part with the number of the line it is on."""
    out = []
    for n, line in enumerate(text.splitlines()):
        for piece in _BREAKS.split(_MARKER.sub("", line)):
            words = _words(_MARKER.sub("", piece))
            if words:
                out.append((n, words))
    return out


def _conditional(lined: list[tuple[int, list[str]]]) -> set[int]:
    """The parts said on a condition: from a part that opens with ``if`` to the end of its
    line ("- If so: YES, go ahead")."""
    out: set[int] = set()
    since: int | None = None  # the line an "if" opened a condition on
    for i, (line, words) in enumerate(lined):
        if since is not None and line != since:
            since = None
        if words[0] == "if":
            since = line
        if since is not None:
            out.add(i)
    return out


def _opens_with_yes(words: list[str]) -> bool:
    i = 0
    while i < len(words):
        for phrase in _PHRASES:
            if tuple(words[i:i + len(phrase)]) == phrase:
                if phrase in YES_PHRASES or phrase in MORE_YES:
                    return True
                i += len(phrase)
                break
        else:
            return False
    return False


def _has(words: list[str], phrases: tuple[str, ...]) -> bool:
    joined = f" {' '.join(words)} "
    return any(f" {w} " in joined for w in phrases)


def _opens(words: list[str], phrases: tuple[str, ...]) -> bool:
    joined = f"{' '.join(words)} "
    return any(joined.startswith(f"{w} ") for w in phrases)


class RetailProse:
    """The retail desk's rules for recorded prose (see the module's docstring)."""

    summary = ("an answer is a yes when it opens with a yes and takes nothing back; one "
               "proposal may cover several writes, and must name each one's order, items, "
               "new items, payment method, cancellation reason and new address")

    def answer(self, text: str) -> Answer | None:
        lined = _lined_parts(text)
        pieces = [words for _, words in lined]
        if not pieces:
            return None
        if any(tuple(pieces[0][:n]) in NO_PHRASES for n in range(1, 4)):
            return "no"
        on_condition = _conditional(lined)
        said_yes = [i for i, p in enumerate(pieces) if _opens_with_yes(p) or
                    (i in on_condition and "yes" in p)]
        yes = [i for i in said_yes if i not in on_condition]
        if not yes:
            return "conditional" if said_yes else None
        last = yes[-1]
        if any(_has(pieces[i], TAKE_BACK) for i in yes) or \
                any(_opens(p, TAKE_BACK) or tuple(p) in NO_PHRASES for p in pieces[last + 1:]):
            return None
        return "yes"

    def mentions(self, tool: str, args: Mapping[str, Any], seen: Seen) -> list[Mention]:
        out: list[Mention] = []
        order_id = args.get("order_id")
        order = seen.last("get_order_details", order_id=order_id) if order_id else None
        if isinstance(order_id, str):
            out.append(Mention(f"order {order_id!r}", (order_id, order_id.lstrip("#"))))
        items = order.get("items", []) if isinstance(order, dict) else []
        for item in dict.fromkeys(args.get("item_ids") or []):
            out.append(Mention(f"item {item!r}", (item, *_unique_name(items, item))))
        for item in dict.fromkeys(args.get("new_item_ids") or []):
            out.append(Mention(f"new item {item!r}", (item,), _options(item, seen)))
        method = args.get("payment_method_id")
        if isinstance(method, str):
            out.append(Mention(f"payment method {method!r}",
                               _method_names(method, order, seen)))
        if tool == "cancel_pending_order":
            out.append(Mention(f"reason {args.get('reason')!r}", (str(args.get("reason")),)))
        if isinstance(args.get("address1"), str):
            out.append(_address(args, seen))
        return out


def _unique_name(items: list[Any], item_id: str) -> tuple[str, ...]:
    names = [i.get("name") for i in items if isinstance(i, dict)]
    mine = [i.get("name") for i in items if isinstance(i, dict) and i.get("item_id") == item_id]
    if mine and isinstance(mine[0], str) and names.count(mine[0]) == 1:
        return (mine[0],)
    return ()


#: A payment method's kind (its id's prefix) and the words that name it.
KINDS = {"paypal": "paypal", "gift_card": "gift card", "credit_card": "credit card"}
#: Option values too common in prose to name an item by.
_PLAIN_VALUES = frozenset({"yes", "no", "none", "true", "false"})


def _options(item: str, seen: Seen) -> tuple[tuple[str, ...], ...]:
    """An item named by its options: every one of them (at least two that are more than
    yes or no), as the agent read them in a product's variants or an item's details."""
    options = None
    for tool, _, result in reversed(seen.reads):
        if not isinstance(result, dict):
            continue
        if tool == "get_item_details" and result.get("item_id") == item:
            options = result.get("options")
        elif tool == "get_product_details":
            options = ((result.get("variants") or {}).get(item) or {}).get("options")
        if isinstance(options, dict):
            break
    if not isinstance(options, dict):
        return ()
    values = tuple(str(v) for v in options.values() if str(v).lower() not in _PLAIN_VALUES)
    return (values,) if len(values) >= 2 else ()


def _address(args: Mapping[str, Any], seen: Seen) -> Mention:
    """A new address, named by its first line, city and zip, or by the id of an order the
    agent read that ships to exactly that address."""
    keys = ("address1", "city", "zip")
    orders = tuple(
        (str(r["order_id"]),) for t, _, r in seen.reads
        if t == "get_order_details" and isinstance(r, dict) and isinstance(r.get("address"), dict)
        and all(r["address"].get(k) == args.get(k) for k in keys) and r.get("order_id")
        and r["order_id"] != args.get("order_id"))
    return Mention(f"address {args['address1']!r}, {args.get('city')!r} {args.get('zip')!r}",
                   (), (tuple(str(args.get(k)) for k in keys), *orders))


def _method_names(method: str, order: Any, seen: Seen) -> tuple[str, ...]:
    names = [method]
    user = next((r for t, _, r in reversed(seen.reads) if t == "get_user_details"
                 and isinstance(r, dict)), None)
    methods = (user or {}).get("payment_methods") or {}
    kind = next((k for k in KINDS if method.startswith(k)), None)
    if kind is not None and [m for m in methods if m.startswith(kind)] == [method]:
        names.append(KINDS[kind])  # the customer's only method of its kind
    card = methods.get(method) or {}
    if card.get("last_four"):
        names.append(str(card["last_four"]))
    history = order.get("payment_history") if isinstance(order, dict) else None
    if history and isinstance(history[0], dict) and \
            history[0].get("payment_method_id") == method:
        names.append("original payment method")
    return tuple(names)


#: What ``fsm shadow --workflow retail`` reads recorded prose with.
SHADOW = RetailProse()
