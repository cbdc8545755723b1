"""The verbs that act on runs, on approvals and on definitions, grouped under their noun.

``fsm runs`` lists runs and ``fsm runs show|history|audit|resume|fork|export|prune`` acts
on them; ``fsm approvals`` lists what runs wait on and ``fsm approvals approve|deny|sweep``
decides or expires it; ``fsm definitions`` lists the versions runs live on and ``fsm
definitions migrate|check-history`` moves runs between them or checks a candidate against
them. The handovers (``fsm handovers``), the users (``fsm users``) and the signing keys
(``fsm keys``) are groups of their own. Each verb is one function, under its noun and at
the top level (``fsm show``, ``fsm approve``, ``fsm migrate``): both spellings work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from fsm.cli import deploys, evidence, exits, inspect, ops, sandbox
from fsm.cli.app import app

#: noun → (the listing it runs without a command, its verbs: (name, function, epilog)).
NOUNS: dict[str, tuple[Callable[..., Any], list[tuple[str, Callable[..., Any], str | None]]]] = {
    "runs": (inspect.runs_cmd, [
        ("show", inspect.show_cmd, None),
        ("history", inspect.history_cmd, None),
        ("audit", inspect.audit_cmd, None),
        ("resume", ops.resume_cmd, exits.HELP),
        ("fork", sandbox.fork_cmd, None),
        ("export", evidence.export_cmd, None),
        ("prune", evidence.prune_cmd, None),
    ]),
    "approvals": (inspect.approvals_cmd, [
        ("approve", ops.approve_cmd, exits.HELP),
        ("deny", ops.deny_cmd, exits.HELP),
        ("sweep", ops.sweep_cmd, None),
    ]),
    "definitions": (deploys.definitions_cmd, [
        ("migrate", deploys.migrate_cmd, None),
        ("check-history", deploys.check_history_cmd, None),
    ]),
}


class ListingOf(TyperGroup):
    """A noun whose first bare word, when it names none of its verbs, is the listing's
    ``--workflow``: ``fsm definitions refund`` is ``fsm definitions --workflow refund``
    (the spelling from before the noun had verbs)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # The options that take a value (typer's own click: no isinstance on click.Option).
        valued = {o for p in self.get_params(ctx)
                  if p.param_type_name == "option" and not getattr(p, "is_flag", False)
                  for o in p.opts}
        i = 0
        while i < len(args):
            word = args[i]
            if word == "--" or not word.startswith("-"):
                j = i + 1 if word == "--" else i
                if j < len(args) and args[j] not in self.commands:
                    args = [*args[:i], "--workflow", args[j], *args[j + 1:]]
                break
            i += 2 if word in valued else 1
        return super().parse_args(ctx, args)


#: The nouns whose bare word is a workflow's name (see :class:`ListingOf`).
BARE_WORKFLOW = {"definitions"}

for _noun, (_listing, _verbs) in NOUNS.items():
    _group = typer.Typer(invoke_without_command=True, rich_markup_mode=None,
                         cls=ListingOf if _noun in BARE_WORKFLOW else TyperGroup)
    _group.callback()(_listing)
    for _name, _fn, _epilog in _verbs:
        _group.command(_name, epilog=_epilog)(_fn)
    app.add_typer(_group, name=_noun)
