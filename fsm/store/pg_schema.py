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
    # 5: each run row names its definition (the queue claims by it), and every definition
    # a store has seen is kept as JSON, by its hash.
    """
    ALTER TABLE runs ADD COLUMN definition_hash TEXT NOT NULL DEFAULT '';
    UPDATE runs SET definition_hash = COALESCE(doc->>'definition_hash',
        substring(snapshot from '"definition_hash":"([^"]*)"'), '');
    CREATE INDEX runs_definition ON runs (status, definition_hash, run_id);
    CREATE TABLE definitions (
        seq BIGSERIAL,
        definition_hash TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        version TEXT NOT NULL DEFAULT '',
        body TEXT NOT NULL,
        doc JSONB,
        recorded_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX definitions_workflow ON definitions (workflow, seq)
    """,
    # 6: conversations with customers: replies kept as they arrive, in the order their
    # commits land, until the run reads them; the hash of each run's reply token.
    """
    CREATE TABLE replies (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        received_at DOUBLE PRECISION NOT NULL,
        run_version INTEGER NOT NULL,
        asked_hash TEXT,
        read_step INTEGER,
        PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX replies_unread ON replies (run_id, seq) WHERE read_step IS NULL;
    CREATE TABLE reply_tokens (
        run_id TEXT PRIMARY KEY REFERENCES runs (run_id),
        token_hash TEXT NOT NULL,
        issued_at DOUBLE PRECISION NOT NULL
    )
    """,
    # 7: the desk: handed-over runs as a queue, what requests are about (to show requests
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
        handed_at DOUBLE PRECISION NOT NULL,
        cause TEXT NOT NULL,
        reason TEXT NOT NULL,
        taken_by TEXT,
        taken_at DOUBLE PRECISION,
        outcome TEXT,
        note TEXT,
        closed_by TEXT,
        closed_at DOUBLE PRECISION
    );
    CREATE INDEX IF NOT EXISTS handovers_queue ON handovers (closed_at, handed_at, handover_id);
    CREATE INDEX IF NOT EXISTS handovers_run ON handovers (run_id, handed_at);
    CREATE TABLE IF NOT EXISTS subjects (
        workflow TEXT NOT NULL,
        subject TEXT NOT NULL,
        run_id TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (workflow, subject, run_id)
    );
    CREATE INDEX IF NOT EXISTS subjects_run ON subjects (run_id);
    CREATE TABLE IF NOT EXISTS tombstones (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        definition_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        head TEXT NOT NULL,
        log_count BIGINT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION NOT NULL,
        pruned_at DOUBLE PRECISION NOT NULL,
        pruned_by TEXT NOT NULL
    )
    """,
    # 8: the hash of the claim event each effect row was logged with.
    """
    ALTER TABLE effects ADD COLUMN claim TEXT
    """,
    # 9: refused decision attempts chained by hash, with the chain's length and head kept
    # in the run row, so that a deleted attempt is noticed (rows from before carry none).
    """
    ALTER TABLE web_refusals ADD COLUMN hash TEXT;
    ALTER TABLE runs ADD COLUMN refusal_count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN refusal_head TEXT NOT NULL
        DEFAULT '0000000000000000000000000000000000000000000000000000000000000000'
    """,
    # 10: the run a run was forked from (fsm fork), to list a run's forks.
    """
    ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
    CREATE INDEX runs_parent ON runs (parent_run_id)
    """,
    # 11: the signature of the log's head, by the deployment's key (fsm.signing).
    """
    ALTER TABLE runs ADD COLUMN log_sig TEXT
    """,
]
