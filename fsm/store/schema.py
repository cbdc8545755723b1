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
    # 7: each run row names its definition (the queue claims by it), and every definition
    # a store has seen is kept as JSON, by its hash.
    """
    ALTER TABLE runs ADD COLUMN definition_hash TEXT NOT NULL DEFAULT '';
    UPDATE runs SET definition_hash = COALESCE(CASE WHEN json_valid(snapshot)
        THEN json_extract(snapshot, '$.definition_hash') END, '');
    CREATE INDEX runs_definition ON runs (status, definition_hash, run_id);
    CREATE TABLE definitions (
        definition_hash TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        version TEXT NOT NULL DEFAULT '',
        body TEXT NOT NULL,
        recorded_at REAL NOT NULL
    );
    CREATE INDEX definitions_workflow ON definitions (workflow, recorded_at)
    """,
    # 8: conversations with customers: replies kept as they arrive, in the order their
    # commits land, until the run reads them; the hash of each run's reply token.
    """
    CREATE TABLE replies (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        received_at REAL NOT NULL,
        run_version INTEGER NOT NULL,
        asked_hash TEXT,
        read_step INTEGER,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE INDEX replies_unread ON replies (run_id, seq) WHERE read_step IS NULL;
    CREATE TABLE reply_tokens (
        run_id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL,
        issued_at REAL NOT NULL
    )
    """,
    # 9: the desk: handed-over runs as a queue, what requests are about (to show requests
    # about the same thing together), and what is kept of pruned runs (IF NOT EXISTS: a
    # database migrated again from an earlier version keeps what it has).
    """
    CREATE TABLE IF NOT EXISTS handovers (
        handover_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        workflow TEXT NOT NULL,
        customer TEXT NOT NULL DEFAULT '',
        request TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL,
        handed_at REAL NOT NULL,
        cause TEXT NOT NULL,
        reason TEXT NOT NULL,
        taken_by TEXT,
        taken_at REAL,
        outcome TEXT,
        note TEXT,
        closed_by TEXT,
        closed_at REAL
    );
    CREATE INDEX IF NOT EXISTS handovers_queue ON handovers (closed_at, handed_at, handover_id);
    CREATE INDEX IF NOT EXISTS handovers_run ON handovers (run_id, handed_at);
    CREATE TABLE IF NOT EXISTS subjects (
        workflow TEXT NOT NULL,
        subject TEXT NOT NULL,
        run_id TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (workflow, subject, run_id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS subjects_run ON subjects (run_id);
    CREATE TABLE IF NOT EXISTS tombstones (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        definition_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        head TEXT NOT NULL,
        log_count INTEGER NOT NULL,
        created_at REAL NOT NULL,
        finished_at REAL NOT NULL,
        pruned_at REAL NOT NULL,
        pruned_by TEXT NOT NULL
    )
    """,
    # 10: the hash of the claim event each effect row was logged with.
    """
    ALTER TABLE effects ADD COLUMN claim TEXT
    """,
    # 11: refused decision attempts chained by hash, with the chain's length and head kept
    # in the run row, so that a deleted attempt is noticed (rows from before carry none).
    """
    ALTER TABLE web_refusals ADD COLUMN hash TEXT;
    ALTER TABLE runs ADD COLUMN refusal_count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN refusal_head TEXT NOT NULL
        DEFAULT '0000000000000000000000000000000000000000000000000000000000000000'
    """,
    # 12: the run a run was forked from (fsm fork), to list a run's forks.
    """
    ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
    CREATE INDEX runs_parent ON runs (parent_run_id)
    """,
    # 13: the signature of the log's head, by the deployment's key (fsm.signing).
    """
    ALTER TABLE runs ADD COLUMN log_sig TEXT
    """,
]
