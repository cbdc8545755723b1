"""Model adapters: policies backed by real model APIs."""

from fsm.adapters.openai import OpenAIPolicy, default_backoff
from fsm.adapters.translate import chat_messages, encode, request_body
from fsm.errors import ModelConfigError

__all__ = [
    "ModelConfigError",
    "OpenAIPolicy",
    "chat_messages",
    "default_backoff",
    "encode",
    "request_body",
]
