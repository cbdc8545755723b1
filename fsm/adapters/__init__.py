"""Model adapters: policies backed by real model APIs.

The names below are loaded when first read: importing one adapter module (the MCP
client, the recorded policy a worker rebuilds) does not import the OpenAI SDK, which
costs a process about a quarter of a second of CPU.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsm.adapters.openai import (
        DEFAULT_TIMEOUT,
        AsyncOpenAIPolicy,
        OpenAIPolicy,
        default_backoff,
    )
    from fsm.adapters.textcalls import TextCalls, find_calls
    from fsm.adapters.translate import chat_messages, encode, forced_choice, request_body
    from fsm.errors import ModelConfigError

#: Each public name, and the module it is read from.
_FROM = {
    "DEFAULT_TIMEOUT": "fsm.adapters.openai",
    "AsyncOpenAIPolicy": "fsm.adapters.openai",
    "OpenAIPolicy": "fsm.adapters.openai",
    "default_backoff": "fsm.adapters.openai",
    "TextCalls": "fsm.adapters.textcalls",
    "find_calls": "fsm.adapters.textcalls",
    "chat_messages": "fsm.adapters.translate",
    "encode": "fsm.adapters.translate",
    "forced_choice": "fsm.adapters.translate",
    "request_body": "fsm.adapters.translate",
    "ModelConfigError": "fsm.errors",
}

__all__ = [
    "DEFAULT_TIMEOUT",
    "AsyncOpenAIPolicy",
    "ModelConfigError",
    "OpenAIPolicy",
    "TextCalls",
    "chat_messages",
    "default_backoff",
    "encode",
    "find_calls",
    "forced_choice",
    "request_body",
]


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:  # a module of the package (``fsm.adapters.openai``), or nothing
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM})
