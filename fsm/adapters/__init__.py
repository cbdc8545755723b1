"""Model adapters: policies backed by real model APIs."""

from fsm.adapters.openai import (
    DEFAULT_TIMEOUT,
    AsyncOpenAIPolicy,
    OpenAIPolicy,
    default_backoff,
)
from fsm.adapters.textcalls import TextCalls, find_calls
from fsm.adapters.translate import chat_messages, encode, forced_choice, request_body
from fsm.errors import ModelConfigError

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
