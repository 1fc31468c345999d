package benchpath

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/citustest"
	"github.com/idemstore/idemstore/internal/pgtest"
)

// TestScaleOutMeasuresEveryTarget runs CaseScaleOut for a fraction of a
// second a target against the test database and the test Citus cluster:
// both operations are measured on PostgreSQL, the coordinator alone and
// the distributed schema (whose rows live on the workers), the section is
// printed, and no schema is left behind on either database.
func TestScaleOutMeasuresEveryTarget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	cfg := &Config{
		DatabaseURL:     pgtest.URL(t),
		CitusURL:        citustest.URL(t),
		Duration:        30 * time.Millisecond,
		Warmup:          10 * time.Millisecond,
		Rounds:          2,
		ScaleOutClients: []int{2, 4},
		Records:         64,
		Cases:           []string{CaseScaleOut},
		Out:             &out,
		Log:             &log,
	}
	res, err := run(ctx, cfg)
	require.NoError(t, err, "log:\n%s", log.String())
	so := res.scaleOut
	require.NotNil(t, so)
	require.Empty(t, so.skipped)
	require.Len(t, so.targets, 3)
	var schemas []string
	for _, tg := range so.targets {
		schemas = append(schemas, tg.schema)
	}
	require.GreaterOrEqual(t, so.targets[2].nodes, 1, "the distributed schema's rows are on the workers")
	require.Len(t, so.rows, len(scaleOutOps)*len(cfg.ScaleOutClients))
	for _, r := range so.rows {
		for i, s := range r.samples {
			require.Positive(t, s.ops, "%s, %d callers, %s", r.op, r.clients, so.targets[i].name)
			require.NotEmpty(t, s.lat)
		}
	}
	require.Contains(t, out.String(), "## Scale-out: one PostgreSQL against a Citus cluster")
	require.Contains(t, out.String(), "| cluster / PostgreSQL |")

	for _, u := range []string{cfg.DatabaseURL, cfg.CitusURL} {
		conn, err := pgx.Connect(ctx, u)
		require.NoError(t, err)
		var left int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = ANY($1)`, schemas).Scan(&left))
		require.NoError(t, conn.Close(ctx))
		require.Zero(t, left, "schemas left on %s", strings.SplitN(u, "@", 2)[len(strings.SplitN(u, "@", 2))-1])
	}
}

// Without Citus the section says it was skipped and how to give it one.
func TestScaleOutSaysWhyItWasSkipped(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	writeScaleOut(&out, &Config{}, &scaleOutResult{skipped: "citustest: no Citus coordinator on this machine: not root"})
	require.Contains(t, out.String(), "Skipped: citustest: no Citus coordinator on this machine: not root.")
	require.Contains(t, out.String(), "-citus-url")
}

// A target that cannot be made fails the case with its error, and the
// targets made before it are closed (their schemas dropped): not a panic
// that hides the error (the deferred close once ranged over the nil
// result of the error path). Not parallel: it counts the run's schemas on
// the test database, where TestScaleOutMeasuresEveryTarget makes its own.
func TestScaleOutTargetThatFailsIsReportedAndTheOthersClosed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	cfg := &Config{
		DatabaseURL:     pgtest.URL(t),
		CitusURL:        "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5", // nothing listens there
		Duration:        30 * time.Millisecond,
		Warmup:          10 * time.Millisecond,
		Rounds:          1,
		ScaleOutClients: []int{2},
		Records:         16,
		Cases:           []string{CaseScaleOut},
		Out:             &out,
		Log:             &log,
	}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	targetSchemas := func() int {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'benchpath_so_%'`).Scan(&n))
		return n
	}
	before := targetSchemas() // a database given by TEST_DATABASE_URL may hold some of an earlier run

	_, err = run(ctx, cfg)
	require.ErrorContains(t, err, "scale-out: Citus coordinator alone")
	require.Contains(t, log.String(), "scale-out: PostgreSQL: storing", "the PostgreSQL target was made first")
	require.Equal(t, before, targetSchemas(), "the PostgreSQL target's schema was left behind")
}
