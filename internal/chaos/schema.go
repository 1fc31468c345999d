package chaos

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Application names the suite's connections carry, so that the audit trail
// tells a worker's write from the cleaner's, and connection resets reach
// the workers only.
const (
	appWorker     = "chaos-worker"
	appCleaner    = "chaos-cleaner"
	appSupervisor = "chaos-supervisor"
)

// evidenceSQL creates, in the store's schema, the tables where the suite
// keeps its evidence, and the audit trigger on idem_records.
//
// chaos_effects holds one row per real execution of the remote-like tool,
// chaos_orders one per order the transactional tool committed,
// chaos_probe_runs one per run of the probe-then-store tool, with the wall
// clock time (Unix nanoseconds) at which its call began, before the store
// was looked up.
//
// chaos_audit gets a row, from a trigger of the suite's own (not from
// idemstore's code), whenever a record appears, disappears, or changes its
// token, status or result: the old and new rows as JSON (so that columns
// added by later migrations do not break it) and `at`, the now() of the
// writing transaction. now() is the clock idemstore decides with, so a
// takeover at a time earlier than the old lease_until is an early re-run
// whatever the store's SQL believed. Renewals and waiter marks change none
// of those columns and are not logged.
const evidenceSQL = `
CREATE TABLE {schema}.chaos_effects (
	id          bigserial   PRIMARY KEY,
	scope       text        NOT NULL,
	key         bytea       NOT NULL,
	token       bigint      NOT NULL,
	attempt     integer     NOT NULL,
	pid         integer     NOT NULL,
	incarnation integer     NOT NULL,
	at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE {schema}.chaos_orders (LIKE {schema}.chaos_effects INCLUDING DEFAULTS);
ALTER TABLE {schema}.chaos_orders ADD PRIMARY KEY (id);

CREATE TABLE {schema}.chaos_probe_runs (
	id          bigserial   PRIMARY KEY,
	scope       text        NOT NULL,
	key         bytea       NOT NULL,
	called_ns   bigint      NOT NULL,
	pid         integer     NOT NULL,
	incarnation integer     NOT NULL,
	at          timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE {schema}.chaos_audit (
	id      bigserial   PRIMARY KEY,
	op      text        NOT NULL,
	app     text        NOT NULL,
	at      timestamptz NOT NULL,
	old_row jsonb,
	new_row jsonb
);

CREATE FUNCTION {schema}.chaos_audit_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO {schema}.chaos_audit (op, app, at, old_row, new_row)
	VALUES (TG_OP, current_setting('application_name'), now(),
		CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
		CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
	RETURN NULL;
END
$$;

CREATE TRIGGER chaos_audit_insert_delete
	AFTER INSERT OR DELETE ON {schema}.idem_records
	FOR EACH ROW EXECUTE FUNCTION {schema}.chaos_audit_record();

CREATE TRIGGER chaos_audit_change
	AFTER UPDATE ON {schema}.idem_records
	FOR EACH ROW
	WHEN (OLD.token IS DISTINCT FROM NEW.token
	   OR OLD.status IS DISTINCT FROM NEW.status
	   OR OLD.result IS DISTINCT FROM NEW.result)
	EXECUTE FUNCTION {schema}.chaos_audit_record();
`

// execer is what installEvidence needs: a pool, a connection or a tx.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// installEvidence creates the evidence tables and the audit trigger in
// schema, which must be migrated already.
func installEvidence(ctx context.Context, db execer, schema string) error {
	if _, err := db.Exec(ctx, inSchema(evidenceSQL, schema)); err != nil {
		return fmt.Errorf("chaos: install evidence tables in %s: %w", schema, err)
	}
	return nil
}

// inSchema fills the quoted schema name into sql.
func inSchema(sql, schema string) string {
	return strings.ReplaceAll(sql, "{schema}", pgx.Identifier{schema}.Sanitize())
}
