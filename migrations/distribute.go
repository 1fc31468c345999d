package migrations

import (
	"context"
	"errors"
	"fmt"

	schemapkg "github.com/idemstore/idemstore/migrations/schema"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Distributing a schema on Citus.
//
// On a Citus cluster the store's two tables are hash-distributed by scope and
// colocated: a scope's row in idem_scopes and all its records live in shards
// on the same worker, so every statement of the call path, which names one
// scope, can be routed to that one worker. The version table stays a plain
// table on the coordinator: only migrations read and write it.

// Names of the distributed tables and their distribution column.
const (
	scopesTable        = "idem_scopes"
	recordsTable       = "idem_records"
	tokenSequence      = "idem_token_seq"
	distributionColumn = "scope"
)

// distributedFunction is a function of migration 4 as Distribute registers
// it with Citus.
type distributedFunction struct {
	// signature is the function's name and argument types.
	signature string
	// delegated: its calls go to the worker that holds the scope of its
	// p_scope argument (and the function is colocated with idem_records);
	// otherwise it is only created on every node, for the others to call.
	delegated bool
	// forceDelegation: its calls are delegated inside a transaction block
	// too (the store calls it in a READ COMMITTED transaction of its own).
	forceDelegation bool
}

// distributedFunctions are the functions of migration 4.
var distributedFunctions = []distributedFunction{
	{signature: "idem_scope_expiry(text, bigint, timestamptz)"},
	{signature: "idem_claim(text, bytea, text, bytea, bigint, bigint, bytea)", delegated: true},
	{signature: "idem_claim_many(text, bytea[], text[], bytea[], bigint, bigint, bytea)", delegated: true},
	{signature: "idem_put(text, bytea, text, bytea, smallint, smallint, bytea, bigint)", delegated: true},
	{signature: "idem_extend_scope(text, bigint)", delegated: true, forceDelegation: true},
	{signature: "idem_resolve(text, bytea, bigint, smallint, smallint, smallint, bytea, text)", delegated: true},
	{signature: "idem_remove_expired_here(text, text, integer)", delegated: true},
}

// distributionArgument is the argument by which the functions are
// distributed: the scope, like the tables.
const distributionArgument = "p_scope"

// ErrNotCitus is what a *NotCitusError unwraps to: Distribute was pointed at
// a database that is not a Citus coordinator, so it changed nothing.
var ErrNotCitus = errors.New("idemstore: not a Citus coordinator")

// NotCitusError says why Distribute refused a database: plain PostgreSQL
// (no citus extension in the database) or a Citus worker rather than the
// coordinator, where distributed tables are created. errors.Is(err,
// ErrNotCitus) holds.
type NotCitusError struct {
	Schema string
	Reason string
}

func (e *NotCitusError) Error() string {
	return fmt.Sprintf("idemstore: cannot distribute schema %q: %s", e.Schema, e.Reason)
}

// Is makes errors.Is(err, ErrNotCitus) hold.
func (e *NotCitusError) Is(target error) bool { return target == ErrNotCitus }

// DistributionError says that a table of the schema is already distributed
// in a way Distribute does not undo by itself (a reference table, another
// distribution column). Undoing it moves data, so it is left to an operator
// (Citus' undistribute_table, then Distribute again).
type DistributionError struct {
	Schema  string
	Table   string
	Problem string
}

func (e *DistributionError) Error() string {
	return fmt.Sprintf("idemstore: cannot distribute %s.%s: %s", e.Schema, e.Table, e.Problem)
}

// TxBeginner is what Distribute needs: *pgxpool.Pool, *pgx.Conn and pgx.Tx
// all have it. Given a pgx.Tx, Distribute runs inside it (as a savepoint) and
// the caller's commit makes it visible.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Distribute makes schema's tables Citus distributed tables, in one
// transaction on the Citus coordinator that q reaches:
//   - idem_scopes and idem_records are hash-distributed by scope and colocated
//     (idem_scopes in a colocation group of its own, so that the host
//     application's tables never share, or constrain, idemstore's shards).
//     Their primary keys, indexes and checks go with them: every unique
//     constraint includes scope, as Citus requires. The shard count is the
//     session's citus.shard_count (Citus' default 32);
//   - the fencing-token sequence idem_token_seq is created on every node
//     (and on nodes added later), for statements that draw tokens on the
//     worker that holds the record. Each worker draws from a range of its
//     own (Citus gives node group g the values from g·2^48+1 up), so tokens
//     drawn on different workers never collide, and all of them exceed the
//     coordinator's, which drew the tokens of a store used before it was
//     distributed;
//   - the functions of migration 4 (idem_claim, idem_claim_many, idem_put,
//     idem_extend_scope, idem_resolve, idem_remove_expired_here) are registered with create_distributed_function,
//     distributed by their p_scope argument and colocated with idem_records:
//     a call is delegated to the worker holding the scope's shards and runs
//     whole there, one round trip (idem_extend_scope also inside a
//     transaction block: force_delegation). Their helper idem_scope_expiry
//     is created on every node;
//   - the version table idem_goose_version stays a local table on the
//     coordinator; migrations keep working on the distributed tables (Citus
//     propagates their DDL). A migration that recreates the functions (a
//     Down and Up of migration 4) leaves them undelegated until Distribute
//     runs again.
//
// Rows already in the tables are copied into the shards (writes wait while
// they are copied, so distribute a large live store in a quiet moment) and
// the coordinator's local copies are truncated.
//
// Distribute is idempotent: what is already distributed as described is left
// alone, so running it again, or after a new migration, changes nothing and
// takes no lock on the tables. It holds the schema's migration lock, so it
// waits for, and is waited for by, a concurrent migration or Distribute.
//
// It fails with a *contract.InputError for a bad schema name, a *NotCitusError
// on plain PostgreSQL or a Citus worker, a *schema.NotMigratedError when the schema
// is not migrated to Latest(), a *DistributionError when a table is
// distributed otherwise, and the database's error otherwise. On failure
// nothing is changed.
func Distribute(ctx context.Context, q TxBeginner, schema string) error {
	if err := schemapkg.Validate(schema); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := distribute(ctx, q, schema)
		if attempt == distributeAttempts || !isDeadlock(err) {
			return err
		}
	}
}

// distributeLockID is the advisory lock every Distribute holds while it
// runs: lockID of a name no schema can have (it holds a space).
var distributeLockID = lockID(" distribute")

// distributeAttempts bounds how often Distribute starts over after a
// deadlock: Citus' DDL on distributed objects (registering a function,
// dropping a schema) takes locks on every node, and two such commands at
// once, in different schemas, can deadlock; the one PostgreSQL aborts may
// simply run again.
const distributeAttempts = 3

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// distribute is one attempt of Distribute, in one transaction.
func distribute(ctx context.Context, q TxBeginner, schema string) error {
	tx, err := q.Begin(ctx)
	if err != nil {
		return fmt.Errorf("distribute schema %q: %w", schema, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := requireCoordinator(ctx, tx, schema); err != nil {
		return err
	}
	// Citus registers a function over one connection per node, which it
	// cannot do after it created shards over several in the same
	// transaction: create them over one as well.
	if _, err := tx.Exec(ctx, "SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"); err != nil {
		return fmt.Errorf("distribute schema %q: %w", schema, err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockID(schema)); err != nil {
		return fmt.Errorf("distribute schema %q: lock: %w", schema, err)
	}
	// And one Distribute at a time in the cluster, whatever the schema: two
	// registering functions at once deadlock on Citus' own locks.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", distributeLockID); err != nil {
		return fmt.Errorf("distribute schema %q: lock: %w", schema, err)
	}
	if err := schemapkg.Check(ctx, tx, schema); err != nil {
		return err
	}
	if err := distributeTable(ctx, tx, schema, scopesTable, "none"); err != nil {
		return err
	}
	scopes := pgx.Identifier{schema, scopesTable}.Sanitize()
	if err := distributeTable(ctx, tx, schema, recordsTable, scopes); err != nil {
		return err
	}
	if err := distributeTokenSequence(ctx, tx, schema); err != nil {
		return err
	}
	for _, f := range distributedFunctions {
		if err := distributeFunction(ctx, tx, schema, f); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("distribute schema %q: commit: %w", schema, err)
	}
	return nil
}

// requireCoordinator refuses plain PostgreSQL and Citus workers. It only
// reads catalogues, so it never aborts the transaction it runs in.
func requireCoordinator(ctx context.Context, tx pgx.Tx, schema string) error {
	var installed bool
	if err := tx.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&installed); err != nil {
		return fmt.Errorf("distribute schema %q: look for the citus extension: %w", schema, err)
	}
	if !installed {
		return &NotCitusError{Schema: schema,
			Reason: "the citus extension is not installed in this database (plain PostgreSQL); connect to a Citus coordinator"}
	}
	var coordinator bool
	if err := tx.QueryRow(ctx, "SELECT citus_is_coordinator()").Scan(&coordinator); err != nil {
		return fmt.Errorf("distribute schema %q: ask Citus for the node's role: %w", schema, err)
	}
	if !coordinator {
		return &NotCitusError{Schema: schema,
			Reason: "this node is a Citus worker; distributed tables are created on the coordinator"}
	}
	return nil
}

// distributeTokenSequence has Citus create idem_token_seq on every node,
// unless it already did. Citus propagates a sequence only as a dependency of
// a distributed table, so the sequence is made the default of
// idem_records.token for a moment (which creates it on every node, and on
// nodes added later) and the default dropped again: the schema keeps the
// shape its migrations give it, and their Down steps keep working.
func distributeTokenSequence(ctx context.Context, tx pgx.Tx, schema string) error {
	records := pgx.Identifier{schema, recordsTable}.Sanitize()
	seq := pgx.Identifier{schema, tokenSequence}.Sanitize()
	var distributed bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_object
		WHERE classid = 'pg_class'::regclass AND objid = $1::regclass)`, seq).Scan(&distributed)
	if err != nil {
		return fmt.Errorf("distribute schema %q: inspect the token sequence: %w", schema, err)
	}
	if distributed {
		return nil
	}
	// The sequence is named as a regclass literal; the schema is validated,
	// so the quoted name holds no single quote.
	for _, ddl := range []string{
		fmt.Sprintf("ALTER TABLE %s ALTER COLUMN token SET DEFAULT nextval('%s'::regclass)", records, seq),
		fmt.Sprintf("ALTER TABLE %s ALTER COLUMN token DROP DEFAULT", records),
	} {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("distribute schema %q: token sequence: %w", schema, err)
		}
	}
	return nil
}

// distributeFunction registers f of schema with Citus as Distribute
// describes, unless it is registered so already.
func distributeFunction(ctx context.Context, tx pgx.Tx, schema string, f distributedFunction) error {
	// The signature is a regprocedure literal; the schema is validated, so
	// the quoted name holds no single quote.
	name := pgx.Identifier{schema}.Sanitize() + "." + f.signature
	records := pgx.Identifier{schema, recordsTable}.Sanitize()
	var done bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_object o
		WHERE o.classid = 'pg_proc'::regclass AND o.objid = $1::regprocedure
		  AND (NOT $2 OR (o.distribution_argument_index = 0
		                  AND o.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = $3::regclass)
		                  AND coalesce(o.force_delegation, false) = $4)))`,
		name, f.delegated, records, f.forceDelegation).Scan(&done)
	if err != nil {
		return fmt.Errorf("distribute schema %q: inspect function %s: %w", schema, f.signature, err)
	}
	if done {
		return nil
	}
	if !f.delegated {
		_, err = tx.Exec(ctx, "SELECT create_distributed_function($1::regprocedure)", name)
	} else {
		var force *bool // NULL: Citus' default (no forced delegation)
		if f.forceDelegation {
			force = &f.forceDelegation
		}
		_, err = tx.Exec(ctx, `SELECT create_distributed_function($1::regprocedure, $2::text,
			colocate_with => $3::text, force_delegation => $4::boolean)`, name, distributionArgument, records, force)
	}
	if err != nil {
		return fmt.Errorf("distribute schema %q: distribute function %s: %w", schema, f.signature, err)
	}
	return nil
}

// distribution is how Citus holds a table: not at all (found false), or by
// method ('h' hash, 'n' none: a reference or Citus local table), column and
// colocation group.
type distribution struct {
	found      bool
	method     string
	column     string
	colocation int64
}

func tableDistribution(ctx context.Context, tx pgx.Tx, table string) (distribution, error) {
	var d distribution
	var column *string
	err := tx.QueryRow(ctx, `SELECT partmethod::text,
		CASE WHEN partkey IS NULL THEN NULL ELSE column_to_column_name(logicalrelid, partkey) END,
		colocationid::bigint
		FROM pg_dist_partition WHERE logicalrelid = $1::regclass`, table).Scan(&d.method, &column, &d.colocation)
	if errors.Is(err, pgx.ErrNoRows) {
		return distribution{}, nil
	}
	if err != nil {
		return distribution{}, err
	}
	d.found = true
	if column != nil {
		d.column = *column
	}
	return d, nil
}

// distributeTable hash-distributes schema.table by scope, colocated with
// colocateWith (a quoted table name, or "none" for a group of its own),
// unless it already is.
func distributeTable(ctx context.Context, tx pgx.Tx, schema, table, colocateWith string) error {
	name := pgx.Identifier{schema, table}.Sanitize()
	d, err := tableDistribution(ctx, tx, name)
	if err != nil {
		return fmt.Errorf("distribute schema %q: inspect %s: %w", schema, table, err)
	}
	if d.found {
		if d.method != "h" || d.column != distributionColumn {
			return &DistributionError{Schema: schema, Table: table, Problem: fmt.Sprintf(
				"it is already a Citus table (method %q, column %q) rather than hash-distributed by %s; undistribute it first",
				d.method, d.column, distributionColumn)}
		}
		return colocate(ctx, tx, schema, table, d, colocateWith)
	}
	var hasRows bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM ONLY "+name+")").Scan(&hasRows); err != nil {
		return fmt.Errorf("distribute schema %q: inspect %s: %w", schema, table, err)
	}
	if _, err := tx.Exec(ctx, "SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)",
		name, distributionColumn, colocateWith); err != nil {
		return fmt.Errorf("distribute schema %q: distribute %s: %w", schema, table, err)
	}
	if hasRows {
		// The rows were copied into the shards; the coordinator's copies are
		// invisible from now on and only take space.
		if _, err := tx.Exec(ctx, "SELECT truncate_local_data_after_distributing_table($1::regclass)", name); err != nil {
			return fmt.Errorf("distribute schema %q: truncate the local copy of %s: %w", schema, table, err)
		}
	}
	return nil
}

// colocate moves an already distributed table into colocateWith's
// colocation group when it is elsewhere (a metadata change when the shard
// counts match; Citus refuses otherwise, and says why).
func colocate(ctx context.Context, tx pgx.Tx, schema, table string, d distribution, colocateWith string) error {
	if colocateWith == "none" {
		return nil
	}
	other, err := tableDistribution(ctx, tx, colocateWith)
	if err != nil {
		return fmt.Errorf("distribute schema %q: inspect %s: %w", schema, colocateWith, err)
	}
	if other.colocation == d.colocation {
		return nil
	}
	name := pgx.Identifier{schema, table}.Sanitize()
	if _, err := tx.Exec(ctx, "SELECT update_distributed_table_colocation($1::regclass, colocate_with => $2)",
		name, colocateWith); err != nil {
		return fmt.Errorf("distribute schema %q: colocate %s with %s: %w", schema, table, colocateWith, err)
	}
	return nil
}
