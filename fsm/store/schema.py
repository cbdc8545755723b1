"""The SQLite schema, as forward migrations keyed by ``PRAGMA user_version``.

Migration N brings a database from version N-1 to N. Never edit a shipped
migration; append a new one.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: the first schema.
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        status TEXT NOT NULL,
        version INTEGER NOT NULL,
        snapshot TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX runs_status ON runs (status);
    CREATE TABLE messages (
        run_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    ) WITHOUT ROWID;
    CREATE TABLE views (
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        step INTEGER NOT NULL,
        time REAL NOT NULL,
        kind TEXT NOT NULL,
        state_before TEXT,
        state_after TEXT,
        tool TEXT,
        event TEXT,
        reason TEXT,
        cost_micros INTEGER NOT NULL DEFAULT 0,
        tokens INTEGER NOT NULL DEFAULT 0,
        reviewer TEXT,
        detail TEXT NOT NULL DEFAULT '{}',
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE effects (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        tool TEXT NOT NULL,
        args TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('STARTED', 'DONE')),
        result TEXT,
        error TEXT,
        started_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        tool TEXT,
        args TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        run_version INTEGER NOT NULL,
        requested_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        decision TEXT,
        reviewer TEXT,
        note TEXT,
        decided_at REAL
    );
    CREATE INDEX approvals_open ON approvals (decision, expires_at);
    CREATE TABLE artifacts (
        sha256 TEXT PRIMARY KEY,
        content TEXT NOT NULL,
        size INTEGER NOT NULL
    )
    """,
    # 2: run leases, so exactly one process drives a run; the log's head, so a deleted
    # last row is noticed.
    """
    ALTER TABLE runs ADD COLUMN lease_owner TEXT;
    ALTER TABLE runs ADD COLUMN lease_at REAL;
    ALTER TABLE runs ADD COLUMN log_count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN log_head TEXT NOT NULL
        DEFAULT '0000000000000000000000000000000000000000000000000000000000000000';
    UPDATE runs SET
        log_count = (SELECT COUNT(*) FROM events WHERE events.run_id = runs.run_id),
        log_head = COALESCE(
            (SELECT hash FROM events WHERE events.run_id = runs.run_id ORDER BY seq DESC LIMIT 1),
            log_head)
    """,
    # 3: effects by run, for audits.
    """
    CREATE INDEX effects_run ON effects (run_id, key)
    """,
    # 4: leases that expire, renewed by a heartbeat, so a lease works across machines.
    """
    ALTER TABLE runs ADD COLUMN lease_until REAL;
    CREATE INDEX runs_runnable ON runs (status, lease_until)
    """,
    # 5: the approval inbox: accounts, refused decision attempts, the notification
    # outbox, and indexes for its pages (newest waiting approvals, newest runs).
    """
    CREATE TABLE accounts (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('approver', 'auditor')),
        password_hash TEXT NOT NULL,
        release_limit INTEGER,
        disabled INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE web_refusals (
        refusal_id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        approval_id TEXT,
        account TEXT,
        action TEXT NOT NULL,
        code TEXT NOT NULL,
        reason TEXT NOT NULL,
        at REAL NOT NULL,
        remote TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX web_refusals_run ON web_refusals (run_id, refusal_id);
    CREATE TABLE notifications (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        approval_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('waiting', 'expired')),
        created_at REAL NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'delivered', 'failed', 'unsent')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL DEFAULT 0,
        last_error TEXT,
        delivered_at REAL
    );
    CREATE INDEX notifications_due ON notifications (status, next_attempt_at);
    CREATE INDEX notifications_approval ON notifications (approval_id);
    CREATE INDEX notifications_run ON notifications (run_id);
    CREATE INDEX approvals_waiting ON approvals (decision, requested_at, approval_id, run_id);
    CREATE INDEX approvals_run ON approvals (run_id, requested_at);
    CREATE INDEX runs_id_status ON runs (run_id, status, workflow);
    CREATE INDEX runs_created ON runs (created_at, run_id);
    CREATE INDEX runs_workflow_created ON runs (workflow, created_at, run_id);
    CREATE INDEX runs_status_created ON runs (status, created_at, run_id)
    """,
    # 6: what a reviewer approved when they changed what was asked (a lower amount).
    """
    ALTER TABLE approvals ADD COLUMN approved_args TEXT
    """,
]
