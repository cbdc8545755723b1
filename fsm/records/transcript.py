"""The transcript's messages as types: one model per shape, told apart by their keys.

Each message is stored (and shown to policies, in :attr:`fsm.View.messages`) as the plain
JSON object of the provider-neutral shape; these models are that object, typed. The
shape is read from the keys the framework has always written, so every database reads
back the same, and :meth:`Message.body` gives the stored object again, key for key::

    user           {"role": "user", "content": "Order A-1001 ..."}
    runtime        {"role": "user", "content": "...", "runtime": true}          (+ "approved")
    approval       {"role": "user", "content": "...", "approved": {...}}
    customer       {"role": "user", "content": "yes", "from": "customer", "reply": 1}
                                                                                 (+ "event")
    summary        {"role": "user", "content": "...", "summary_of": [1, 9]}     (views only)
    call           {"role": "assistant", "tool": "get_order", "args": {...}}      (+ "text")
    final          {"role": "assistant", "final": "Your refund is on its way."}
    to_customer    {"role": "assistant", "content": "Shall I?", "to": "customer"}
    text           {"role": "assistant", "content": "..."}
    result         {"role": "tool", "tool": "get_order", "result": {...}}
    error          {"role": "tool", "tool": "refund_item", "error": "..."}
    other          any other object (kept as it is: a transcript fsm did not write)

Extra keys are kept (:attr:`pydantic.BaseModel.model_extra`). :func:`read` builds the
models of rows the framework wrote without validating them again (a resumed run reads
every message); :func:`validate` checks a message that came from elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_validator,
)

__all__ = [
    "ApprovalNote", "AssistantText", "CustomerAnswer", "CustomerReply", "FinalAnswer",
    "Message", "OtherMessage", "RuntimeNote", "Summary", "ToolCall", "ToolError",
    "ToolResult", "UserMessage", "read", "read_all", "shape", "validate",
]


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    #: The tag of this shape (see :func:`shape`).
    KIND: ClassVar[str]
    #: Keys every message of this shape has, whatever was given (its marks).
    MARKS: ClassVar[tuple[str, ...]] = ("role",)
    #: Field name → the key it is stored under, where the two differ.
    KEYS: ClassVar[dict[str, str]] = {}

    role: str

    #: Stored key → field name, and the defaults of the fields (set for each shape).
    _NAMES: ClassVar[dict[str, str]]
    _DEFAULTS: ClassVar[dict[str, Any]]
    _MARKSET: ClassVar[frozenset[str]]
    _FIELDS: ClassVar[tuple[str, ...]]
    _MARK_JSON: ClassVar[dict[str, Any]]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._NAMES = {cls.KEYS.get(n, n): n for n in cls.model_fields}
        cls._DEFAULTS = {n: (None if f.is_required() else f.get_default(call_default_factory=True))
                         for n, f in cls.model_fields.items()}
        cls._MARKSET = frozenset(cls.MARKS)
        cls._FIELDS = tuple(cls.model_fields)
        cls._MARK_JSON = {cls.KEYS.get(n, n): cls._DEFAULTS[n] for n in cls.MARKS}

    @model_validator(mode="after")
    def _marked(self) -> Any:
        # A validated message always has its marks, given or not (its body shows them).
        self.__pydantic_fields_set__.update(self.MARKS)
        return self

    @classmethod
    def make(cls: type[_M], **values: Any) -> _M:
        """A message of the framework's own values, built without validating them (they
        are already of their declared types)."""
        fields = cls._DEFAULTS.copy()
        fields.update(values)
        m = _new(cls)
        _set(m, "__dict__", fields)
        _set(m, "__pydantic_fields_set__", cls._MARKSET.union(values))
        _set(m, "__pydantic_extra__", None)
        _set(m, "__pydantic_private__", None)
        return m

    def body(self) -> dict[str, Any]:
        """The message's JSON object, as stored."""
        d, given, keys = self.__dict__, self.__pydantic_fields_set__, self.KEYS
        out = {keys.get(k, k): d[k] for k in self._FIELDS if k in given}
        extra = self.__pydantic_extra__
        if extra:
            out.update(extra)
        return out


_M = TypeVar("_M", bound=_Message)
_set = object.__setattr__
_new = object.__new__


def _build(cls: type[_M], values: Mapping[str, Any]) -> _M:
    """``cls`` from stored keys, unvalidated: declared fields (absent ones take their
    defaults) and the rest as extras, as pydantic itself would keep them."""
    names = cls._NAMES
    fields = dict(cls._DEFAULTS)
    given: set[str] = set()
    extra: dict[str, Any] = {}
    for k, v in values.items():
        name = names.get(k)
        if name is None:
            extra[k] = v
        else:
            fields[name] = v
            given.add(name)
    m = _new(cls)
    _set(m, "__dict__", fields)
    _set(m, "__pydantic_fields_set__", given)
    _set(m, "__pydantic_extra__", extra)
    _set(m, "__pydantic_private__", None)
    return m


# -- what people and the runtime say (role "user") ---------------------------------------

class UserMessage(_Message):
    """What the run was asked (its first message), or a person's words to the model."""

    KIND = "user"
    role: Literal["user"] = "user"
    content: str


class RuntimeNote(_Message):
    """The runtime's words to the model: a refusal, an approval's outcome, a reply that
    did not come. ``approved``: the arguments a person approved, when they changed."""

    KIND = "runtime"
    MARKS = ("role", "runtime")
    role: Literal["user"] = "user"
    content: str
    runtime: Literal[True] = True
    approved: dict[str, Any] | None = None


class ApprovalNote(_Message):
    """A person's decision on a request, told to the model, with the arguments they
    approved (which the model must now use)."""

    KIND = "approval"
    role: Literal["user"] = "user"
    content: str
    approved: dict[str, Any]


class CustomerReply(_Message):
    """A customer's reply, read by the run (``reply``: its ``seq``; ``event``: the
    customer event derived from it)."""

    KIND = "customer"
    MARKS = ("role", "sender")
    KEYS = {"sender": "from"}
    role: Literal["user"] = "user"
    content: str
    sender: Literal["customer"] = Field("customer", alias="from")
    reply: int
    event: str | None = None


class Summary(_Message):
    """A compaction's summary of ``messages[summary_of[0]:summary_of[1]]`` (in a view only:
    the transcript keeps what it replaces)."""

    KIND = "summary"
    role: Literal["user"] = "user"
    content: str
    summary_of: list[int]


# -- what the model says (role "assistant") ----------------------------------------------

class ToolCall(_Message):
    """The model calls a tool (or ``advance``, to fire an event), perhaps with words."""

    KIND = "call"
    role: Literal["assistant"] = "assistant"
    tool: str
    args: dict[str, Any]
    text: str | None = None


class FinalAnswer(_Message):
    """The model's final answer."""

    KIND = "final"
    role: Literal["assistant"] = "assistant"
    final: str


class CustomerAnswer(_Message):
    """The model's words to the customer, in a state that asks the customer."""

    KIND = "to_customer"
    MARKS = ("role", "to")
    role: Literal["assistant"] = "assistant"
    content: str
    to: Literal["customer"] = "customer"


class AssistantText(_Message):
    """The model's plain text (no tool call, no final answer)."""

    KIND = "text"
    role: Literal["assistant"] = "assistant"
    content: str


# -- what tools answer (role "tool") -----------------------------------------------------

class ToolResult(_Message):
    """A tool's result (a large one as an excerpt: ``excerpt``, ``artifact``, ``chars``)."""

    KIND = "result"
    MARKS = ("role", "result")
    role: Literal["tool"] = "tool"
    tool: str
    result: Any = None


class ToolError(_Message):
    """A tool's error, or the runtime's refusal of a call: what the model reads."""

    KIND = "error"
    role: Literal["tool"] = "tool"
    tool: str
    error: str


class OtherMessage(_Message):
    """A message of no shape fsm writes (a transcript made elsewhere), kept as it is."""

    KIND = "other"
    role: str = ""


_SHAPES: tuple[type[_Message], ...] = (
    UserMessage, RuntimeNote, ApprovalNote, CustomerReply, Summary, ToolCall, FinalAnswer,
    CustomerAnswer, AssistantText, ToolResult, ToolError, OtherMessage)
_BY_KIND: dict[str, type[_Message]] = {c.KIND: c for c in _SHAPES}


def shape(m: Any) -> str:
    """The tag of a message (a model, or its JSON object): which keys it has decides."""
    if isinstance(m, _Message):
        return m.KIND
    if not isinstance(m, Mapping):
        return "other"
    role = m.get("role")
    if role == "tool":
        return "error" if "error" in m else "result"
    if role == "assistant":
        return _assistant(m)
    return _user(m) if role == "user" else "other"


def _assistant(m: Mapping[str, Any]) -> str:
    if "tool" in m:
        return "call"
    if "final" in m:
        return "final"
    return "to_customer" if m.get("to") == "customer" else "text"


def _user(m: Mapping[str, Any]) -> str:
    if m.get("runtime"):
        return "runtime"
    if m.get("from") == "customer":
        return "customer"
    if "summary_of" in m:
        return "summary"
    return "approval" if "approved" in m else "user"


Message = Annotated[
    Annotated[UserMessage, Tag("user")] | Annotated[RuntimeNote, Tag("runtime")]
    | Annotated[ApprovalNote, Tag("approval")] | Annotated[CustomerReply, Tag("customer")]
    | Annotated[Summary, Tag("summary")] | Annotated[ToolCall, Tag("call")]
    | Annotated[FinalAnswer, Tag("final")] | Annotated[CustomerAnswer, Tag("to_customer")]
    | Annotated[AssistantText, Tag("text")] | Annotated[ToolResult, Tag("result")]
    | Annotated[ToolError, Tag("error")] | Annotated[OtherMessage, Tag("other")],
    Discriminator(shape)]
"""One transcript message: a union of the shapes above, told apart by :func:`shape`."""

_ADAPTER: TypeAdapter[Any] = TypeAdapter(Message)


def read(m: Mapping[str, Any]) -> Message:
    """The typed message of a JSON object the framework wrote (not validated again)."""
    return _build(_BY_KIND[shape(m)], m)  # type: ignore[return-value]


def read_all(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """:func:`read` of each message."""
    by_kind = _BY_KIND
    return [_build(by_kind[shape(m)], m) for m in messages]  # type: ignore[misc]


def validate(m: Any) -> Message:
    """A message from elsewhere, validated: a :class:`pydantic.ValidationError` names
    what is wrong with it."""
    return _ADAPTER.validate_python(m)  # type: ignore[no-any-return]
