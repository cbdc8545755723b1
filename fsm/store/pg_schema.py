"""The PostgreSQL schema, as forward migrations recorded in ``fsm_schema``.

Migration N brings a database from version N-1 to N; each runs in one transaction
under an advisory lock, so workers starting at once migrate exactly once. Never
edit a shipped migration; append a new one.

Every JSON value is kept as the exact text that was written (the hash chain and
the snapshots must read back as they were). The run snapshot, effect arguments and
results and approval arguments also have a JSONB copy (``doc``, ``args_doc``,
``result_doc``) for operators to query and index; PostgreSQL's JSONB cannot hold
U+0000, so the copy has U+FFFD in its place.
"""

from __future__ import annotations

#: ``pg_advisory_xact_lock`` key held while migrating (any constant, unique to fsm).
MIGRATION_LOCK = 0x46534D01
#: ``pg_try_advisory_lock`` key of the fleet's one sweeper.
SWEEP_LOCK = 0x46534D02
#: The channel ``NOTIFY``-ed with a run id when a run may have become runnable.
CHANNEL = "fsm_runnable"

MIGRATIONS: list[str] = [
    # 1: the first schema, with expiring leases and the log's head in the run row.
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        status TEXT NOT NULL,
        version INTEGER NOT NULL,
        snapshot TEXT NOT NULL,
        doc JSONB,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        lease_owner TEXT,
        lease_at DOUBLE PRECISION,
        lease_until DOUBLE PRECISION,
        log_count INTEGER NOT NULL DEFAULT 0,
        log_head TEXT NOT NULL
            DEFAULT '0000000000000000000000000000000000000000000000000000000000000000'
    );
    CREATE INDEX runs_status ON runs (status, lease_until);
    CREATE TABLE messages (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        idx INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    );
    CREATE TABLE views (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        step INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, step)
    );
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        seq INTEGER NOT NULL,
        step INTEGER NOT NULL,
        time DOUBLE PRECISION NOT NULL,
        kind TEXT NOT NULL,
        state_before TEXT,
        state_after TEXT,
        tool TEXT,
        event TEXT,
        reason TEXT,
        cost_micros BIGINT NOT NULL DEFAULT 0,
        tokens BIGINT NOT NULL DEFAULT 0,
        reviewer TEXT,
        detail TEXT NOT NULL DEFAULT '{}',
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX events_time ON events (time) WHERE kind = 'policy';
    CREATE TABLE effects (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        step INTEGER NOT NULL,
        tool TEXT NOT NULL,
        args TEXT NOT NULL,
        args_doc JSONB,
        status TEXT NOT NULL CHECK (status IN ('STARTED', 'DONE')),
        result TEXT,
        result_doc JSONB,
        error TEXT,
        started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION
    );
    CREATE INDEX effects_run ON effects (run_id, key);
    CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        step INTEGER NOT NULL,
        tool TEXT,
        args TEXT NOT NULL,
        args_doc JSONB,
        args_hash TEXT NOT NULL,
        run_version INTEGER NOT NULL,
        requested_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        decision TEXT,
        reviewer TEXT,
        note TEXT,
        decided_at DOUBLE PRECISION
    );
    CREATE INDEX approvals_open ON approvals (expires_at) WHERE decision IS NULL;
    CREATE TABLE artifacts (
        sha256 TEXT PRIMARY KEY,
        content TEXT NOT NULL,
        size INTEGER NOT NULL
    );
    """,
    # 2: wake the workers (LISTEN fsm_runnable) whenever a run is running and unleased:
    # created, decided, or released by a worker that stopped.
    f"""
    CREATE FUNCTION fsm_notify_runnable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', NEW.run_id);
        RETURN NULL;
    END $$;
    CREATE TRIGGER runs_runnable AFTER INSERT OR UPDATE ON runs FOR EACH ROW
        WHEN (NEW.status = 'running' AND NEW.lease_owner IS NULL)
        EXECUTE FUNCTION fsm_notify_runnable();
    """,
    # 3: the approval inbox: accounts, refused decision attempts, the notification outbox.
    """
    CREATE TABLE accounts (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('approver', 'auditor')),
        password_hash TEXT NOT NULL,
        release_limit BIGINT,
        disabled BOOLEAN NOT NULL DEFAULT FALSE,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE web_refusals (
        refusal_id BIGSERIAL PRIMARY KEY,
        run_id TEXT NOT NULL,
        approval_id TEXT,
        account TEXT,
        action TEXT NOT NULL,
        code TEXT NOT NULL,
        reason TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        remote TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX web_refusals_run ON web_refusals (run_id, refusal_id);
    CREATE TABLE notifications (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        approval_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('waiting', 'expired')),
        created_at DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'delivered', 'failed', 'unsent')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        last_error TEXT,
        delivered_at DOUBLE PRECISION
    );
    CREATE INDEX notifications_due ON notifications (status, next_attempt_at);
    CREATE INDEX notifications_approval ON notifications (approval_id);
    CREATE INDEX notifications_run ON notifications (run_id);
    CREATE INDEX approvals_waiting ON approvals (decision, requested_at, approval_id, run_id)
    """,
    # 4: what a reviewer approved when they changed what was asked (a lower amount).
    """
    ALTER TABLE approvals ADD COLUMN approved_args TEXT
    """,
]
