"""A SQL store: one database, and one object per role over it.

:class:`SQLStore` is the bundle: its :class:`~fsm.store.database.Database` (SQLite's
file or PostgreSQL's pool, transactions, errors, migrations, signing keys) and its
:class:`~fsm.store.roles.Roles`, each written once for both dialects:

==============  ===========================================  ============================
role            its object                                   its module
==============  ===========================================  ============================
runs            ``SQLRuns``                                  ``fsm.store._sql_runs``
effects         ``SQLEffects``                               ``fsm.store._sql_runs``
approvals       ``SQLApprovals``                             ``fsm.store._sql_runs``
definitions     ``SQLDefinitions``                           ``fsm.store._sql_runs``
conversations   ``SQLConversations``                         ``fsm.store._sql_runs``
inbox           ``SQLInbox`` (accounts, refusals, outbox)    ``fsm.store._sql_inbox``
desk            ``SQLDesk``                                  :mod:`fsm.store.prune`
leases          ``SQLLeases``                                ``fsm.store._sql_leases``
==============  ===========================================  ============================

Every method of :class:`~fsm.store.base.Store` is answered by one role (the table
below the class); a commit writes the rows of several roles in one transaction of the
database, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fsm.signing import Keys
from fsm.store._sql_inbox import SQLInbox
from fsm.store._sql_leases import SQLLeases
from fsm.store._sql_runs import (
    SQLApprovals,
    SQLConversations,
    SQLDefinitions,
    SQLEffects,
    SQLRuns,
    parse_many,
)
from fsm.store.base import Store
from fsm.store.database import Database
from fsm.store.prune import SQLDesk
from fsm.store.roles import Roles

__all__ = ["SQLStore", "parse_many"]


class _Via:
    """A store method answered by one of the store's roles: reading it gives the role's own
    bound method, so a subclass may still override the store's method (and ``super()``
    finds this). A role's own calls to another of its methods stay within the role: an
    override on the store does not reach them."""

    __slots__ = ("name", "role")

    def __init__(self, role: str) -> None:
        self.role = role
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, store: Any, owner: type | None = None) -> Any:
        if store is None:
            return self
        try:
            roles = vars(store)["roles"]
        except KeyError:
            raise AttributeError(f"{type(store).__name__}.{self.name}: the store has no "
                                 "roles yet (SQLStore.__init__ was not called)") from None
        return getattr(getattr(roles, self.role), self.name)

    def __call__(self, store: Any, *args: Any, **kwargs: Any) -> Any:
        """``SQLiteStore.commit(store, c)``: the method read from the class, called."""
        return self.__get__(store)(*args, **kwargs)


def _via(role: str) -> Any:
    return _Via(role)


class SQLStore(Store):
    """A store over one SQL :class:`Database`; :attr:`roles` are its role objects."""

    def __init__(self, db: Database) -> None:
        #: The database every role keeps its rows in.
        self.db = db
        self.location = db.location
        runs = SQLRuns(db)
        self.roles = Roles(runs=runs, effects=SQLEffects(db), approvals=SQLApprovals(db),
                           definitions=SQLDefinitions(db), inbox=SQLInbox(db, runs),
                           conversations=SQLConversations(db), desk=SQLDesk(db),
                           leases=SQLLeases(db))

    @property
    def keys(self) -> Keys:  # type: ignore[override]
        return self.db.keys

    @property
    def readonly(self) -> bool:
        return self.db.readonly

    @property
    def schema_version(self) -> int:
        return self.db.schema_version

    def close(self) -> None:
        self.db.close()

    async def open_async(self) -> bool:
        return await self.db.open_async()

    async def close_async(self) -> None:
        await self.db.close_async()

    def admission(self) -> asyncio.Semaphore | None:
        return self.db.admission()

    # -- which role answers what -------------------------------------------------------

    create_run = _via("runs")
    commit = _via("runs")
    load_run = _via("runs")
    list_runs = _via("runs")
    messages = _via("runs")
    view_record = _via("runs")
    events = _via("runs")
    log_head = _via("runs")
    signed_head = _via("runs")
    artifact = _via("runs")
    run_columns = _via("runs")
    snapshot_text = _via("runs")
    forks_of = _via("runs")
    not_found = _via("runs")

    claim_effect = _via("effects")
    effect = _via("effects")
    effects = _via("effects")

    approvals = _via("approvals")
    approval = _via("approvals")

    record_definition = _via("definitions")
    definition = _via("definitions")
    definitions = _via("definitions")
    definition_counts = _via("definitions")
    version_labels = _via("definitions")
    definition_column = _via("definitions")

    add_account = _via("inbox")
    save_account = _via("inbox")
    account = _via("inbox")
    accounts = _via("inbox")
    add_refusal = _via("inbox")
    refusals = _via("inbox")
    refusal_head = _via("inbox")
    notifications = _via("inbox")
    due_notifications = _via("inbox")
    save_notification = _via("inbox")
    waiting = _via("inbox")
    count_waiting = _via("inbox")
    runs_page = _via("inbox")
    count_runs = _via("inbox")
    workflow_names = _via("inbox")

    add_reply = _via("conversations")
    replies = _via("conversations")
    reply_token = _via("conversations")

    handovers = _via("desk")
    count_handovers = _via("desk")
    handover = _via("desk")
    run_handovers = _via("desk")
    subject_runs = _via("desk")
    tombstone = _via("desk")
    count_prunable = _via("desk")
    fork_edges = _via("desk")
    prune_batch = _via("desk")

    acquire = _via("leases")
    renew = _via("leases")
    release = _via("leases")
    lease = _via("leases")
    claim_runnable = _via("leases")
    subscribe = _via("leases")
    sweep_lock = _via("leases")
