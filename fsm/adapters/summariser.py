"""The model-backed summariser: compaction summaries written by the policy's model."""

from __future__ import annotations

from typing import Any, Protocol

from fsm.policy import Usage
from fsm.records import text_json
from fsm.runtime.compaction import Chunk, Summary, facts_section


class Completes(Protocol):
    """A policy that can send one chat completion request (the OpenAI adapter)."""

    model: str

    def complete(self, body: dict[str, Any]) -> tuple[dict[str, Any], Usage]: ...


SUMMARY_PROMPT = (
    "You summarise the older part of a tool-using agent's transcript so the agent can "
    "continue without it. Keep ids, amounts, decisions, errors and what people said. "
    "Plain text, at most {max_chars} characters."
)


class ModelSummariser:
    """Asks the policy's model for the summary; the run facts are appended verbatim."""

    def __init__(self, policy: Completes, *, max_chars: int = 2000) -> None:
        self.policy = policy
        self.max_chars = max_chars

    def __call__(self, chunk: Chunk) -> Summary:
        # Only what no summary covered yet, after the summary so far: the request stays
        # small however long the run grows.
        parts = []
        if chunk.previous_summary:
            parts.append(f"The summary so far:\n{chunk.previous_summary}")
        parts.append(f"The turns that follow it:\n{text_json(chunk.fresh_messages)}")
        body = {"model": self.policy.model, "messages": [
            {"role": "system", "content": SUMMARY_PROMPT.format(max_chars=self.max_chars)},
            {"role": "user", "content": "\n\n".join(parts)},
        ]}
        response, usage = self.policy.complete(body)
        choices = response.get("choices") or [{}]
        text = str(((choices[0] or {}).get("message") or {}).get("content") or "").strip()
        parts = [f"Summary of transcript messages {chunk.start}–{chunk.end - 1} (by the "
                 f"model; the full record is kept):", text[: self.max_chars] or "(empty)"]
        parts += facts_section(chunk)
        return Summary("\n".join(parts), usage, by="model")
