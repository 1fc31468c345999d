package migrations

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/migrations/schema"
)

// DefaultConnectTimeout bounds each connection attempt of a Migrator made by
// Open when neither the URL (connect_timeout) nor Config.ConnectTimeout sets
// one, so an unreachable server is reported instead of hanging a deploy.
const DefaultConnectTimeout = 10 * time.Second

// configName names Config in its errors.
const configName = "migrations.Config"

// Config says which schema a Migrator works on. A nil *Config means the
// defaults.
type Config struct {
	// Schema is the PostgreSQL schema that holds idemstore's tables; it
	// must pass schema.Validate. Defaults to schema.Default.
	Schema string
	// ConnectTimeout bounds each connection attempt of a Migrator made by
	// Open, unless the URL sets connect_timeout. New ignores it: the pool
	// is the caller's. Defaults to DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Schema == "" {
		out.Schema = schema.Default
	}
	if out.ConnectTimeout == 0 {
		out.ConnectTimeout = DefaultConnectTimeout
	}
	return out
}

func (c Config) validate() error {
	if err := schema.ValidateConfig(configName, "Schema", c.Schema); err != nil {
		return err
	}
	return contract.CheckConfigDuration(configName, "ConnectTimeout", c.ConnectTimeout)
}

// Migrator applies and inspects idemstore's migrations in one schema. It
// holds no connection of its own between calls and is safe for concurrent
// use; separate Migrators (in one process or many) may migrate the same
// schema at once: the advisory lock lets one apply while the others wait,
// as long as their contexts allow, then find nothing left to do.
//
// Every method that changes the schema has a ...Tx twin that runs inside a
// transaction the caller owns (see the package doc for how).
type Migrator struct {
	pool    *pgxpool.Pool // nil: only the ...Tx methods work
	owned   bool          // Open made pool; Close closes it
	schema  string
	sources []source
}

// New returns a Migrator for the migrations in FS that works on the
// caller's pool; the pool stays the caller's (Close does not close it). It
// needs at most one of the pool's connections at a time. pool may be nil
// when only the ...Tx methods will be used. New sends nothing to the
// database; it fails only with a *contract.ConfigError for a bad Config.
func New(pool *pgxpool.Pool, cfg *Config) (*Migrator, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	sources, err := parseSources(FS)
	if err != nil {
		// The embedded files are fixed at build time and tested.
		return nil, fmt.Errorf("migrations: embedded files: %w", err)
	}
	return &Migrator{pool: pool, schema: c.Schema, sources: sources}, nil
}

// Open is New on a pool of its own, made from databaseURL (a URL or
// key=value pairs, as pgx accepts them), for tools that have no pool: Close
// closes it. It connects once to report an unreachable server, a refused
// login or a missing database at once. A malformed URL gives a
// *contract.ConfigError that does not repeat the URL (it may hold a
// password).
func Open(ctx context.Context, databaseURL string, cfg *Config) (*Migrator, error) {
	const op = "connect to database"
	if err := contract.CheckContext(ctx); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, &contract.ConfigError{Config: "migrations.Open", Field: "databaseURL", Problem: urlProblem(err)}
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = c.ConnectTimeout
	}
	// One connection does: no route holds two at once.
	pc.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, classify(ctx, op, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, classify(ctx, op, err)
	}
	m, err := New(pool, &c)
	if err != nil {
		pool.Close()
		return nil, err
	}
	m.owned = true
	return m, nil
}

// urlProblem says what is wrong with a database URL that pgx could not
// parse, in pgx's words and without the URL (its redaction of passwords is
// best effort), at most a bounded prefix of it (contract.Quote).
func urlProblem(err error) string {
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return "malformed"
	}
	msg := pce.Error()
	if inner := pce.Unwrap(); inner != nil {
		msg = strings.TrimSuffix(msg, " ("+inner.Error()+")")
	}
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+len("`: "):]
	}
	return "malformed: " + contract.Quote(msg) + " (the URL is not repeated: it may hold a password)"
}

// Close closes the pool Open made. For a Migrator made by New it does
// nothing: the pool is the caller's; nor for one not made by New or Open.
func (m *Migrator) Close() {
	if m != nil && m.owned {
		m.pool.Close()
	}
}

// Schema returns the schema the Migrator works on ("" for a Migrator not
// made by New or Open).
func (m *Migrator) Schema() string {
	if m.unmade() {
		return ""
	}
	return m.schema
}

// Latest returns the highest migration version in FS (schema.Latest); 0
// for a Migrator not made by New or Open.
func (m *Migrator) Latest() int64 {
	if m.unmade() {
		return 0
	}
	return m.sources[len(m.sources)-1].version
}

// unmade reports a Migrator that New and Open did not make: nil (what an
// ignored error of theirs leaves) or a zero value. It knows no migration
// and no schema.
func (m *Migrator) unmade() bool { return m == nil || len(m.sources) == 0 }

// Up applies every pending migration to the schema in the database at
// databaseURL, creating the schema if needed: Open, Migrator.Up and Close in
// one call, for tools and tests. It is safe to run from several processes
// at once and does nothing on a current schema.
func Up(ctx context.Context, databaseURL, schemaName string) error {
	m, err := Open(ctx, databaseURL, &Config{Schema: schemaName})
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up(ctx)
	return err
}

// usable refuses a nil context, a Migrator New and Open did not make (a
// *contract.ConfigError, instead of a nil dereference) and, for the pool
// route, a Migrator made without a pool.
func (m *Migrator) usable(ctx context.Context, needPool bool) error {
	if err := contract.CheckContext(ctx); err != nil {
		return err
	}
	if m.unmade() {
		return &contract.ConfigError{Config: "migrations.Migrator", Field: "migrator", Problem: "nil, or not made by migrations.New or Open"}
	}
	if needPool && m.pool == nil {
		return &contract.ConfigError{Config: "migrations.New", Field: "pool", Problem: "nil: this Migrator runs only the ...Tx methods"}
	}
	return nil
}

// checkTarget refuses a version no migration has (0 is allowed going down:
// every migration rolled back).
func (m *Migrator) checkTarget(v int64, down bool) error {
	if down && v == 0 {
		return nil
	}
	if _, ok := lookup(m.sources, v); ok {
		return nil
	}
	versions := make([]string, len(m.sources))
	for i, s := range m.sources {
		versions[i] = strconv.FormatInt(s.version, 10)
	}
	low := ""
	if down {
		low = "0, "
	}
	return &contract.InputError{Field: "version", Problem: fmt.Sprintf("no migration has version %d (this build has %s%s)", v, low, strings.Join(versions, ", "))}
}
