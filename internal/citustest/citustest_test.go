package citustest

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	schemapkg "github.com/idemstore/idemstore/migrations/schema"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestURLReachesACitusCoordinatorWithNodesForShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var coordinator bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT citus_is_coordinator()").Scan(&coordinator))
	require.True(t, coordinator)
	var nodes int
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND shouldhaveshards AND isactive").Scan(&nodes))
	require.GreaterOrEqual(t, nodes, 1)
	require.NotEmpty(t, Source())
}

// distributionOf returns method, column and colocation group of a table, or
// found = false for a table Citus does not hold.
func distributionOf(t *testing.T, q Querier, schema, table string) (method, column string, colocation int64, found bool) {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT partmethod::text, column_to_column_name(logicalrelid, partkey), colocationid::bigint
		FROM pg_dist_partition WHERE logicalrelid = $1::regclass`, pgx.Identifier{schema, table}.Sanitize())
	require.NoError(t, err)
	defer rows.Close()
	if !rows.Next() {
		require.NoError(t, rows.Err())
		return "", "", 0, false
	}
	require.NoError(t, rows.Scan(&method, &column, &colocation))
	return method, column, colocation, true
}

func TestNewSchemaIsMigratedAndDistributedByScopeColocated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := NewSchema(t)
	require.NoError(t, schemapkg.Check(ctx, pool, schema))

	m1, c1, g1, ok := distributionOf(t, pool, schema, "idem_scopes")
	require.True(t, ok, "idem_scopes is distributed")
	m2, c2, g2, ok := distributionOf(t, pool, schema, "idem_records")
	require.True(t, ok, "idem_records is distributed")
	require.Equal(t, []string{"h", "scope", "h", "scope"}, []string{m1, c1, m2, c2})
	require.Equal(t, g1, g2, "colocated")
	_, _, _, ok = distributionOf(t, pool, schema, "idem_goose_version")
	require.False(t, ok, "the version table stays local")
}

func TestNewLocalSchemaIsMigratedButNotDistributed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := NewLocalSchema(t)
	require.NoError(t, schemapkg.Check(ctx, pool, schema))
	_, _, _, ok := distributionOf(t, pool, schema, "idem_records")
	require.False(t, ok)
}

func TestAStatementOnOneScopeIsRoutedToOneShard(t *testing.T) {
	t.Parallel()
	pool, schema := NewSchema(t)
	key := sha256.Sum256([]byte("k"))
	get := "SELECT status FROM " + pgx.Identifier{schema, "idem_records"}.Sanitize() + " WHERE scope = $1 AND key = $2"
	RequireRouted(t, pool, get, "run-1", key[:])

	// The check can fail: a statement over every scope fans out to all shards.
	all := "SELECT count(*) FROM " + pgx.Identifier{schema, "idem_records"}.Sanitize() + " WHERE status = $1"
	ok, why := Routed(Plan(t, pool, all, int16(2)))
	require.False(t, ok)
	require.Contains(t, why, "task")
}

func TestRoutedRefusesSubplansAndCoordinatorPlans(t *testing.T) {
	t.Parallel()
	routed := "Custom Scan (Citus Adaptive)  (cost=0.00..0.00 rows=0 width=0)\n  Task Count: 1\n  Tasks Shown: All"
	ok, _ := Routed(routed)
	require.True(t, ok)
	for name, plan := range map[string]string{
		"subplan":    "Custom Scan (Citus Adaptive)\n  ->  Distributed Subplan 2_1\n  Task Count: 1",
		"insert-sel": "Custom Scan (Citus INSERT ... SELECT)\n  ->  Custom Scan (Citus Adaptive)\n  Task Count: 1",
		"local":      "Function Scan on idem_claim  (cost=0.25..10.25 rows=1000 width=189)",
		"fan-out":    "Custom Scan (Citus Adaptive)\n  Task Count: 32",
	} {
		ok, why := Routed(plan)
		require.False(t, ok, name)
		require.NotEmpty(t, why, name)
	}
}

func TestInlineWritesTypedLiterals(t *testing.T) {
	t.Parallel()
	got, err := Inline("SELECT $1, $2, $3, $10", "it's", []byte{0xab}, int16(3), 1, 2, 3, 4, 5, 6, int64(10))
	require.NoError(t, err)
	require.Equal(t, `SELECT 'it''s'::text, '\xab'::bytea, 3::smallint, 10::bigint`, got)
	_, err = Inline("SELECT $1", struct{}{})
	require.Error(t, err)
}

func TestOnlyNoSourceOutsideCIMaySkip(t *testing.T) {
	t.Parallel()
	none := &unavailableError{reasons: []string{"no Docker engine", "not root"}}
	require.True(t, mayskip(none, false))
	require.False(t, mayskip(none, true), "in CI a missing Citus must fail")
	require.False(t, mayskip(errors.New("cluster.sh start: initdb failed"), false), "a source that breaks must fail")
}

func TestScriptsDirComesFromTheEnvironmentAndMustHoldTheScripts(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	_, err := scriptsDir()
	require.Error(t, err, "an empty directory has no scripts")
	for _, s := range []string{"build.sh", "cluster.sh"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, s), []byte("#!/bin/bash\n"), 0o755))
	}
	got, err := scriptsDir()
	require.NoError(t, err)
	require.Equal(t, dir, got)
}

func TestABaseLockedByAnotherBinaryIsPassedOver(t *testing.T) {
	t.Parallel()
	base := lastBase - 3 // a base this test binary's own cluster does not take first
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "idemstore-citustest-"+strconv.Itoa(base)+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	c, url, err := tryBase(context.Background(), t.TempDir(), base)
	require.NoError(t, err)
	require.Nil(t, c)
	require.Empty(t, url)
}

// A node stopped with StopNode refuses connections until StartNode, then
// serves again on the same port with its data. Not parallel: the
// package's other tests share the cluster, and run after this one.
func TestAStoppedNodeComesBackOnItsPort(t *testing.T) {
	u := URL(t)
	if !CanStopNodes() {
		t.Skipf("the coordinator came from %s: its nodes cannot be stopped", Source())
	}
	ports := NodePorts(t)
	require.Len(t, ports, 3)
	worker := ports[2]
	cfg, err := pgx.ParseConfig(u)
	require.NoError(t, err)
	cfg.Port = uint16(worker)
	cfg.ConnectTimeout = 5 * time.Second
	ctx := context.Background()

	StopNode(t, worker)
	_, err = pgx.ConnectConfig(ctx, cfg)
	require.Error(t, err, "the worker is down")

	StartNode(t, worker)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var coordinator bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT citus_is_coordinator()").Scan(&coordinator))
	require.False(t, coordinator, "the same worker, its data kept")
}
