package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/citustest"
)

// TestChaosOnCitus is TestChaos on a Citus coordinator (internal/citustest:
// a coordinator and two workers), the store's tables distributed by scope
// as `migrate distribute` does: the same workers, kills, connection resets,
// cleaner and checks, with the coordinator and then a worker stopped and
// started as the database restarts (when citustest started the cluster and
// can stop its nodes; none otherwise).
//
// What differs is only where the evidence is kept (citusChaos.install):
// the side-effect tables are distributed and colocated with the records,
// the audit trigger fires on the shards and writes to a table on the node
// that holds them, and the trail is gathered on the coordinator at the end.
//
// Its parts run one after the other, and no other test of this package uses
// Citus: they share the test binary's cluster, whose nodes the profile
// stops and starts.
func TestChaosOnCitus(t *testing.T) {
	t.Parallel()
	t.Run("broken store caught", testBrokenStoreOnCitus)
	t.Run("profile", testChaosProfileOnCitus)
}

func testChaosProfileOnCitus(t *testing.T) {
	prof := chosenProfile(t)
	pool, schema := citustest.NewSchema(t)
	cc := newCitusChaos(t, pool, schema)
	db := chaosDB{url: cc.workerURL, schema: schema, pool: pool,
		install: cc.install, gather: cc.gather, cleanerURL: cc.cleanerURL}
	if citustest.CanStopNodes() {
		// The coordinator first (what the workers connect to), then a
		// worker (what holds the shards), in turn.
		ports := citustest.NodePorts(t)
		order := []int{ports[0], ports[1], ports[2]}
		n := 0
		db.restart = func(t *testing.T) {
			port := order[n%len(order)]
			n++
			t.Logf("chaos on citus: restarting the node on port %d", port)
			citustest.StopNode(t, port)
			down := time.NewTimer(prof.DownFor) // the outage itself, not a synchronisation
			<-down.C
			citustest.StartNode(t, port)
		}
		prof.DBRestarts = max(prof.DBRestarts, 2)
		crashed := 0
		db.crash = func(t *testing.T) {
			port := order[(crashed+1)%len(order)] // not the node restarted last
			crashed++
			t.Logf("chaos on citus: crashing the node on port %d", port)
			citustest.CrashNode(t, port)
			citustest.StartNode(t, port)
		}
	} else {
		t.Logf("chaos on citus: the coordinator came from %s, whose nodes cannot be stopped: no restarts or crashes", citustest.Source())
		prof.DBRestarts, prof.DBCrashes = 0, 0
	}
	res := runChaos(t, prof, db, NoFault)

	// Printed, not only logged, so that the line shows without -v.
	fmt.Println(strings.Replace(summaryLine(res.counts, res.rep), "chaos:", "chaos on citus:", 1))
	require.Empty(t, res.problems, "the workers must only end as planned")
	require.Zero(t, res.rep.Violations(), "violations:\n%s", strings.Join(res.rep.Details, "\n"))
	for _, p := range FailPoints {
		require.GreaterOrEqual(t, res.got.ByPoint[p], prof.KillsPerPoint, "kills at %s", p)
	}
	require.GreaterOrEqual(t, res.counts.Acks, prof.Acks)
	require.GreaterOrEqual(t, res.counts.DBRestarts, prof.DBRestarts)
	require.GreaterOrEqual(t, res.counts.DBCrashes, prof.DBCrashes)
	require.GreaterOrEqual(t, res.counts.ConnResets, prof.ConnResets)
	require.Positive(t, res.rep.Orders, "the transactional tool ran")
	require.Positive(t, res.rep.Takeovers, "claims of killed workers were taken over")
	require.Positive(t, res.rep.CleanerRemovals, "cleanup removed expired records during the run")
	require.Positive(t, res.rep.CheckedAtTheEnd, "acknowledged outcomes were checked against the final records")
	require.ElementsMatch(t, []string{appWorker, appCleaner}, auditApps(t, pool, schema),
		"every write on the workers was told by its role")
}

// The checks count on Citus too: a store that forgets stored outcomes (a
// DELETE routed to the worker, seen by the trigger on the shard) is caught
// as duplicates and lost outcomes.
func testBrokenStoreOnCitus(t *testing.T) {
	pool, schema := citustest.NewSchema(t)
	cc := newCitusChaos(t, pool, schema)
	prof := ShortProfile()
	prof.Name, prof.Acks, prof.KillsPerPoint, prof.DBRestarts, prof.DBCrashes, prof.ConnResets = "fault", 100, 0, 0, 0, 0
	res := runChaos(t, prof, chaosDB{url: cc.workerURL, schema: schema, pool: pool,
		install: cc.install, gather: cc.gather, cleanerURL: cc.cleanerURL}, FaultForgetOutcomes)
	t.Log(summaryLine(res.counts, res.rep))
	require.Positive(t, res.rep.Duplicates, "duplicates must count what the %s store does", FaultForgetOutcomes)
	require.Positive(t, res.rep.Lost, "lost must count what the %s store does", FaultForgetOutcomes)
}

// auditApps returns the writers the gathered audit trail names.
func auditApps(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), inSchema(`SELECT DISTINCT app FROM {schema}.chaos_audit`, schema))
	require.NoError(t, err)
	apps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return apps
}

// citusChaos is what a chaos run on Citus needs besides the schema: a role
// for the worker processes and one for the cleaner, and their URLs.
//
// On a worker node, the statements the coordinator sends for a session
// carry Citus' application_name ("citus_internal gpid=…"), not the
// session's, but its role: the audit trigger tells the worker processes'
// writes from the cleaner's by role. Both roles are members of the
// coordinator URL's role, whose tables they use as it does.
type citusChaos struct {
	pool                    *pgxpool.Pool
	schema                  string
	workerRole, cleanerRole string
	workerURL, cleanerURL   string
}

// newCitusChaos creates the two roles (on every node: Citus propagates
// them), dropped when t ends.
func newCitusChaos(t *testing.T, pool *pgxpool.Pool, schema string) *citusChaos {
	t.Helper()
	ctx := context.Background()
	base, err := url.Parse(citustest.URL(t))
	require.NoError(t, err, "the coordinator's URL")
	var owner string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_user").Scan(&owner))
	cc := &citusChaos{pool: pool, schema: schema, workerRole: schema + "_worker", cleanerRole: schema + "_cleaner"}
	for _, r := range []struct {
		role string
		url  *string
	}{{cc.workerRole, &cc.workerURL}, {cc.cleanerRole, &cc.cleanerURL}} {
		var b [16]byte
		_, err := rand.Read(b[:])
		require.NoError(t, err)
		password := hex.EncodeToString(b[:])
		_, err = pool.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE %s",
			pgx.Identifier{r.role}.Sanitize(), password, pgx.Identifier{owner}.Sanitize()))
		require.NoError(t, err, "create role %s", r.role)
		t.Cleanup(func() {
			if _, err := pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{r.role}.Sanitize()); err != nil {
				t.Logf("chaos on citus: drop role %s: %v", r.role, err)
			}
		})
		u := *base
		u.User = url.UserPassword(r.role, password)
		*r.url = u.String()
	}
	return cc
}

// citusEvidenceSQL is evidenceSQL for Citus, one statement per element
// (Citus runs DDL one statement at a time):
//   - chaos_effects and chaos_orders are distributed by scope and colocated
//     with idem_records: an order and the outcome stored with it
//     (pgstore.TxTool) are written on one worker in one transaction. Beside a
//     table of the coordinator, they would be two commits (Citus commits a
//     transaction over the coordinator and one worker without two-phase
//     commit);
//   - the audit trigger fires on the shards, on the workers, and writes to
//     chaos_audit_here, a plain table on each node (citusAuditHereSQL);
//     gather copies every node's rows into chaos_audit, on the coordinator,
//     where loadEvidence reads them;
//   - the writer is told by role (see citusChaos).
var citusEvidenceSQL = []string{
	`CREATE TABLE {schema}.chaos_effects (
		id          bigserial   NOT NULL,
		scope       text        NOT NULL,
		key         bytea       NOT NULL,
		token       bigint      NOT NULL,
		attempt     integer     NOT NULL,
		pid         integer     NOT NULL,
		incarnation integer     NOT NULL,
		at          timestamptz NOT NULL DEFAULT clock_timestamp())`,
	`CREATE TABLE {schema}.chaos_orders (LIKE {schema}.chaos_effects INCLUDING DEFAULTS)`,
	`SELECT create_distributed_table('{schema}.chaos_effects', 'scope', colocate_with => '{schema}.idem_records')`,
	`SELECT create_distributed_table('{schema}.chaos_orders', 'scope', colocate_with => '{schema}.idem_records')`,
	`CREATE TABLE {schema}.chaos_probe_runs (
		id          bigserial   NOT NULL,
		scope       text        NOT NULL,
		key         bytea       NOT NULL,
		called_ns   bigint      NOT NULL,
		pid         integer     NOT NULL,
		incarnation integer     NOT NULL,
		at          timestamptz NOT NULL DEFAULT clock_timestamp())`,
	`SELECT create_distributed_table('{schema}.chaos_probe_runs', 'scope', colocate_with => '{schema}.idem_records')`,
	`CREATE TABLE {schema}.chaos_audit (
		id      bigserial   PRIMARY KEY,
		op      text        NOT NULL,
		app     text        NOT NULL,
		at      timestamptz NOT NULL,
		old_row jsonb,
		new_row jsonb)`,
	`SELECT nodeid, success, result FROM run_command_on_all_nodes($$` + citusAuditHereSQL + `$$)`,
	`CREATE FUNCTION {schema}.chaos_audit_record() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO {schema}.chaos_audit_here (op, app, at, old_row, new_row)
		VALUES (TG_OP,
			CASE WHEN current_setting('application_name') NOT LIKE 'citus_internal%' THEN current_setting('application_name')
			     WHEN session_user = '{worker}' THEN '` + appWorker + `'
			     WHEN session_user = '{cleaner}' THEN '` + appCleaner + `'
			     ELSE 'citus:' || session_user END,
			now(),
			CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
			CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
		RETURN NULL;
	END
	$$`,
	// Citus creates triggers on distributed tables, on every shard, only
	// when told it may.
	`SET citus.enable_unsafe_triggers = on`,
	`CREATE TRIGGER chaos_audit_insert_delete
		AFTER INSERT OR DELETE ON {schema}.idem_records
		FOR EACH ROW EXECUTE FUNCTION {schema}.chaos_audit_record()`,
	`CREATE TRIGGER chaos_audit_change
		AFTER UPDATE ON {schema}.idem_records
		FOR EACH ROW
		WHEN (OLD.token IS DISTINCT FROM NEW.token
		   OR OLD.status IS DISTINCT FROM NEW.status
		   OR OLD.result IS DISTINCT FROM NEW.result)
		EXECUTE FUNCTION {schema}.chaos_audit_record()`,
	`RESET citus.enable_unsafe_triggers`,
}

// citusAuditHereSQL creates a node's own audit table.
const citusAuditHereSQL = `CREATE TABLE {schema}.chaos_audit_here (
	id      bigserial   PRIMARY KEY,
	op      text        NOT NULL,
	app     text        NOT NULL,
	at      timestamptz NOT NULL,
	old_row jsonb,
	new_row jsonb)`

// citusSQL fills in the schema and the roles.
func (cc *citusChaos) citusSQL(sql string) string {
	return strings.NewReplacer("{worker}", cc.workerRole, "{cleaner}", cc.cleanerRole).Replace(inSchema(sql, cc.schema))
}

// install creates the evidence tables and the audit trigger, on one
// connection (the trigger needs the session's setting).
func (cc *citusChaos) install(ctx context.Context) error {
	conn, err := cc.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for _, stmt := range citusEvidenceSQL {
		if !strings.Contains(stmt, "run_command_on_all_nodes") {
			if _, err := conn.Exec(ctx, cc.citusSQL(stmt)); err != nil {
				return fmt.Errorf("chaos on citus: install evidence: %w\n%s", err, stmt)
			}
			continue
		}
		if err := onAllNodes(ctx, conn, cc.citusSQL(stmt), nil); err != nil {
			return fmt.Errorf("chaos on citus: create the nodes' audit tables: %w", err)
		}
	}
	return nil
}

// onAllNodes runs a run_command_on_all_nodes query and hands each node's
// result to each (in node order), failing on any node's failure.
func onAllNodes(ctx context.Context, conn *pgxpool.Conn, query string, each func(node int32, result string) error) error {
	rows, err := conn.Query(ctx, query+" ORDER BY nodeid")
	if err != nil {
		return err
	}
	type nodeResult struct {
		Node    int32
		Success bool
		Result  string
	}
	results, err := pgx.CollectRows(rows, pgx.RowToStructByPos[nodeResult])
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return fmt.Errorf("no node answered")
	}
	for _, r := range results {
		if !r.Success {
			return fmt.Errorf("node %d: %s", r.Node, r.Result)
		}
		if each != nil {
			if err := each(r.Node, r.Result); err != nil {
				return fmt.Errorf("node %d: %w", r.Node, err)
			}
		}
	}
	return nil
}

// gather copies the audit trail of every node into chaos_audit, node by
// node and each in its own order. A record lives on one node for the whole
// run (no shard moves), so its events keep their order; events of
// different records are never compared by position.
func (cc *citusChaos) gather(ctx context.Context) error {
	conn, err := cc.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	read := cc.citusSQL(`SELECT nodeid, success, result FROM run_command_on_all_nodes($$
		SELECT coalesce(jsonb_agg(to_jsonb(a) ORDER BY a.id), '[]'::jsonb) FROM {schema}.chaos_audit_here a $$)`)
	insert := cc.citusSQL(`INSERT INTO {schema}.chaos_audit (op, app, at, old_row, new_row)
		SELECT e->>'op', e->>'app', (e->>'at')::timestamptz, NULLIF(e->'old_row', 'null'), NULLIF(e->'new_row', 'null')
		FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x(e, n) ORDER BY n`)
	err = onAllNodes(ctx, conn, read, func(_ int32, trail string) error {
		_, err := conn.Exec(ctx, insert, trail)
		return err
	})
	if err != nil {
		return fmt.Errorf("chaos on citus: gather the audit trail: %w", err)
	}
	return nil
}
