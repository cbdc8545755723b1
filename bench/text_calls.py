"""How long reading a reply's text for tool calls takes, typical and adversarial.

Every text reply of a model goes through :func:`fsm.adapters.textcalls.find_calls`
before it counts as a final answer, so its cost must stay small next to a model
call, whatever the model writes. Prints microseconds per reply for each input.

    python bench/text_calls.py            # 200 repetitions each
    python bench/text_calls.py -n 20      # quicker
"""

from __future__ import annotations

import argparse
import json
import time

from fsm.adapters.textcalls import MAX_SCAN_CHARS, find_calls

NAMES = ("get_order", "get_policy", "advance")
CALL = json.dumps({"name": "get_order", "arguments": {"order_id": "A-1001"}})

INPUTS = {
    "plain answer (60 chars)": "Your refund of ₹350 for the electric kettle is on its way.",
    "hermes <tool_call>": f"<tool_call>\n{CALL}\n</tool_call>",
    "python_tag": f"<|python_tag|>{CALL}<|eom_id|>",
    "fenced json": f"Calling it:\n```json\n{CALL}\n```",
    "bare json in text": f"Let me check the order. {CALL}",
    "pythonic": '[get_order(order_id="A-1001")]',
    "prose 20k chars": "The order was delivered on time. " * 600,
    "json answer, not a call (20k)": json.dumps({"items": [{"id": i, "note": "ok"}
                                                          for i in range(800)]}),
    "braces at the limit": "{" * MAX_SCAN_CHARS,
    "'[{' at the limit": "[{" * (MAX_SCAN_CHARS // 2),
    "nested brackets at the limit": "[" * (MAX_SCAN_CHARS // 2) + "]" * (MAX_SCAN_CHARS // 2),
    "pythonic-looking, deep": "get_order(" * 5000 + ")" * 5000,
}


def measure(text: str, repeat: int) -> tuple[float, bool]:
    found = find_calls(text, NAMES)
    start = time.perf_counter()
    for _ in range(repeat):
        find_calls(text, NAMES)
    return (time.perf_counter() - start) / repeat * 1e6, found is not None and bool(found.calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="repetitions per input")
    args = parser.parse_args()
    print(f"{'input':36} {'chars':>7} {'µs/reply':>10}  call?")
    for label, text in INPUTS.items():
        micros, is_call = measure(text, args.n)
        print(f"{label:36} {len(text):>7} {micros:>10.1f}  {'yes' if is_call else 'no'}")


if __name__ == "__main__":
    main()
