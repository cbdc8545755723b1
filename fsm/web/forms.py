"""What a client sends, read as plain text: form fields, ids in the path, query filters.

Every value is text no store refuses: no NUL character, and no longer than its field
allows. A bad value is a 400 naming the field and what is allowed; nothing is decided.
"""

from __future__ import annotations

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request

from fsm.errors import InboxRefused

#: The longest note a decision may carry (characters); docs/how-to/inbox.md says so too.
NOTE_MAX = 4000
#: The longest value of any other field, id or filter (characters).
TEXT_MAX = 512
#: Longer limits of some fields (characters).
LIMITS = {"note": NOTE_MAX, "password": 1024, "next": 2048, "action": 16, "amount": 40}
#: How much of a value a message repeats.
SHOWN = 60


def clip(text: str, size: int = SHOWN) -> str:
    """``text``, cut to ``size`` characters (with ``…``) so a message never echoes a flood."""
    return text if len(text) <= size else f"{text[:size]}… ({len(text)} characters)"


def bad(what: str, value: str, limit: int = TEXT_MAX) -> InboxRefused | None:
    """The refusal of ``value`` for ``what`` (e.g. ``"form field 'note'"``), or ``None``."""
    if "\x00" in value:
        return InboxRefused("input", f"the {what} contains a NUL character (\\x00), which no "
                            "text here may contain; nothing was decided", 400)
    if len(value) > limit:
        return InboxRefused("input", f"the {what} has {len(value)} characters; at most "
                            f"{limit} are allowed; nothing was decided", 400)
    return None


def check_address(request: Request) -> None:
    """Raise the refusal of an id in the path or a query filter that is not plain text."""
    values = [(f"id {k!r} in the address", str(v)) for k, v in request.path_params.items()]
    values += [(f"query parameter {k!r}", v) for k, v in request.query_params.multi_items()]
    for what, value in values:
        if "\x00" in value:
            raise InboxRefused("input", f"the {what} contains a NUL character (\\x00), "
                               "which no id or filter has", 400)


async def read_form(request: Request, *names: str) -> dict[str, str]:
    """The form's fields ``names`` as text (``""`` when absent), or raise the 400 that
    names what is wrong: a file upload, a NUL character, a value too long, a body that is
    not a form."""
    try:
        form = await request.form()
    except HTTPException as exc:
        raise InboxRefused("input", f"the request body is not a form that can be read "
                           f"({exc.detail}); nothing was decided", 400) from None
    fields: dict[str, str] = {}
    for name in names:
        value = form.get(name)
        if isinstance(value, UploadFile):
            raise InboxRefused("input", f"the form field {name!r} is a file upload; it must "
                               "be text; nothing was decided", 400)
        problem = bad(f"form field {name!r}", value or "", LIMITS.get(name, TEXT_MAX))
        if problem is not None:
            raise problem
        fields[name] = value or ""
    return fields
