"""What each family of OpenAI-compatible server accepts, as read from its own request
handling, and how a server is recognised.

=================  ==============================================================
family             what its request handling does (the facts the adapter relies on)
=================  ==============================================================
openai             ``tool_choice``: ``auto``, ``none``, ``required``, a named function.
                   An assistant tool-call message may have ``content`` null, ``""`` or
                   none. The output cap is ``max_completion_tokens`` (reasoning models
                   refuse ``max_tokens``).
vllm               ``required`` and a named function are served by guided decoding;
                   ``auto`` (also the default when tools are sent) is a 400 unless the
                   server runs with ``--enable-auto-tool-choice --tool-call-parser``.
                   ``content`` may be null. ``max_tokens`` caps the reply.
llama.cpp          ``llama-server``: ``tool_choice`` is read as a string (``auto``,
                   ``none``, ``required``); an object silently becomes ``auto``.
                   ``content`` may be a string, an array, null, or left out when
                   ``tool_calls`` are present. ``max_tokens`` (or ``n_predict``) caps the
                   reply; ``t_max_predict_ms`` bounds the generation time, after which the
                   server answers with what it has, usage included.
llama-cpp-python   Its request model wants a string ``content`` for an assistant
                   message: null is a 500 (a validation error of several kilobytes), a
                   missing key is a 500 from ``chatml-function-calling``'s template. That
                   template shows no ``tool`` message to the model, and without
                   ``tool_choice`` (or with ``none``) leaves the tools out of the prompt;
                   ``required`` fails its ``assert`` (a 500 with an empty message). A named
                   function (and ``auto``) is constrained by a grammar built from the
                   tool's schema: a ``pattern`` or a large ``maxLength`` can crash the
                   server. In ``auto`` mode the model may pick "message", after which the
                   template's grammar admits no text: an empty reply. A request's own
                   ``grammar`` (GBNF) applies when no tool is forced. ``max_tokens`` caps
                   the reply (not in ``auto`` mode of ``chatml-function-calling``, which
                   asks with no cap).
ollama             Its OpenAI layer has no ``tool_choice`` (ignored); ``content`` may be
                   null or missing only when ``tool_calls`` are present (else a 400
                   "invalid message content type"). ``max_tokens`` becomes ``num_predict``.
generic            Anything else: the common ground of the above.
=================  ==============================================================

A server is recognised by ``GET /models``: llama-cpp-python's models are ``owned_by:
"me"``, llama-server's ``"llamacpp"``, vLLM's ``"vllm"``; Ollama's answer for a local
default port 11434, OpenAI's for ``api.openai.com``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

#: The ``tool_choice`` values the adapter can send, most forceful first. ``"omit"``
#: leaves the field out (the server's default). ``"grammar"`` is llama-cpp-python's own
#: way to force one call of several tools: ``tool_choice: "none"`` with a ``grammar``
#: (GBNF) that admits only ``{"name": TOOL, "arguments": {...}}``, the tools listed in
#: the system message (``chatml-function-calling``'s ``auto`` mode lets the model pick
#: "message", then admits no text at all).
CHOICES = ("function", "grammar", "required", "auto", "none", "omit")


@dataclass(frozen=True)
class Family:
    """How the adapter talks to one family of server."""

    name: str
    #: ``tool_choice`` values to try, in order, where the state needs a tool call.
    forced: tuple[str, ...]
    #: ... and where a final answer is accepted too.
    free: tuple[str, ...]
    #: ``"tool"``: tool results as ``tool`` messages; ``"user"``: as user messages (for
    #: chat templates that show no tool message to the model).
    results_as: str = "tool"
    #: The request field that caps the reply's length.
    cap_field: str = "max_tokens"
    #: Leave out of the schemas what the server's grammar converter cannot take
    #: (``pattern``, large ``maxLength``); the gate still checks every argument.
    grammar_safe: bool = False
    #: Send ``t_max_predict_ms`` (llama-server): the server stops generating before the
    #: client gives up, and reports what it used.
    time_limit: bool = False


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("openai", forced=("function", "required", "auto"), free=("auto",),
           cap_field="max_completion_tokens"),
    Family("vllm", forced=("function", "required", "auto", "none"), free=("auto", "none")),
    Family("llama.cpp", forced=("required", "auto", "none"), free=("auto", "none"),
           time_limit=True),
    Family("llama-cpp-python", forced=("function", "grammar", "auto"), free=("auto",),
           results_as="user", grammar_safe=True),
    Family("ollama", forced=("omit",), free=("omit",)),
    Family("generic", forced=("function", "required", "auto", "none", "omit"),
           free=("auto", "none", "omit")),
)}
#: What ``server=`` accepts: a family, or ``auto`` (recognised by ``GET /models``).
SERVER_NAMES = ("auto", *FAMILIES)

_OWNERS = {"me": "llama-cpp-python", "llamacpp": "llama.cpp", "vllm": "vllm"}


def recognise(base_url: str, models: Any) -> str:
    """The family of the server at ``base_url`` from its ``GET /models`` answer (any
    JSON, or ``None`` when it gave none)."""
    data = models.get("data") if isinstance(models, Mapping) else None
    owners = {str(m.get("owned_by")) for m in data or [] if isinstance(m, Mapping)}
    for owner, family in _OWNERS.items():
        if owner in owners:
            return family
    url = urlparse(base_url)
    if (url.hostname or "").lower() == "api.openai.com":
        return "openai"
    if url.port == 11434 or "library" in owners:
        return "ollama"
    return "generic"


# -- schemas a grammar converter can take ----------------------------------------------

#: The longest ``maxLength`` kept in a grammar-safe schema: the converter nests one rule
#: per allowed character, and a deep nesting overflows the grammar parser's stack.
MAX_GRAMMAR_LENGTH = 64


def grammar_safe(schema: Any) -> Any:
    """``schema`` without what llama-cpp-python's grammar converter crashes on: every
    ``pattern`` and every ``maxLength`` above :data:`MAX_GRAMMAR_LENGTH`."""
    if isinstance(schema, list):
        return [grammar_safe(v) for v in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str):
            continue
        if key == "maxLength" and isinstance(value, int) and value > MAX_GRAMMAR_LENGTH:
            continue
        # Property names are data, not keywords: only their schemas are cleaned.
        out[key] = ({k: grammar_safe(v) for k, v in value.items()}
                    if key in ("properties", "$defs", "definitions")
                    and isinstance(value, Mapping) else grammar_safe(value))
    return out


# -- a grammar for one call of several tools (llama-cpp-python) ----------------------------

_JSON_GBNF = r"""
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" hex hex hex hex) )* "\"" ws
hex    ::= [0-9a-fA-F]
number ::= "-"? [0-9]+ ("." [0-9]+)? ws
ws     ::= [ \t\n]?
"""


def call_grammar(names: list[str]) -> str:
    """A GBNF grammar admitting exactly one ``{"name": ..., "arguments": {...}}`` object
    whose name is one of ``names`` (tool names are letters, digits, ``_`` and ``-``)."""
    choices = " | ".join(f'"\\"{n}\\""' for n in names)
    return ('root ::= "{" ws "\\"name\\":" ws name "," ws "\\"arguments\\":" ws object '
            '"}"\n' f"name ::= {choices}\n" + _JSON_GBNF.strip() + "\n")
