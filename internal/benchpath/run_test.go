package benchpath

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// TestRunMeasuresEveryCase runs the whole runner for a fraction of a
// second a side against the test database, so that it cannot rot while the
// store and the executor change under it: every case must measure both
// sides (each of whose operations checks what it got), print its row, and
// leave no schema behind.
func TestRunMeasuresEveryCase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	cfg := &Config{
		DatabaseURL:    pgtest.URL(t),
		Duration:       30 * time.Millisecond,
		Warmup:         10 * time.Millisecond,
		Rounds:         2,
		Clients:        []int{1, 3},
		Records:        64,
		CleanupRecords: 500,
		ScaleRecords:   300,
		Cases:          withoutScaleOut(AllCases),
		Out:            &out,
		Log:            &log,
	}
	res, err := run(ctx, cfg)
	require.NoError(t, err, "log:\n%s", log.String())

	pairCases := 0
	for _, name := range AllCases {
		if name != CaseCleanup && name != CaseScale && name != CaseScaleOut {
			pairCases++
		}
	}
	require.Len(t, res.pairs, pairCases*len(cfg.Clients))
	for _, r := range res.pairs {
		require.Positive(t, r.raw.ops, "%s, %d callers: raw side", r.pair.name, r.clients)
		require.Positive(t, r.lib.ops, "%s, %d callers: library side", r.pair.name, r.clients)
		require.NotEmpty(t, r.raw.lat, r.pair.name)
		require.NotEmpty(t, r.lib.lat, r.pair.name)
		require.Len(t, r.rounds, cfg.Rounds)
		require.Positive(t, r.ratio())
		require.Contains(t, out.String(), "| "+r.pair.name+" | ")
	}

	require.NotNil(t, res.cleanup)
	for _, s := range []cleanupSide{res.cleanup.raw, res.cleanup.lib} {
		require.Equal(t, cfg.Rounds*cfg.CleanupRecords, s.removed)
		require.NotEmpty(t, s.replays.lat)
	}
	require.NotEmpty(t, res.cleanup.idle.lat)

	require.Len(t, res.scale, len(cfg.Clients))
	for _, r := range res.scale {
		require.Len(t, r.sides, 3)
		for _, s := range r.sides {
			require.Positive(t, s.lib.ops, s.label)
			require.Positive(t, s.raw.ops, s.label)
		}
	}

	for _, section := range []string{"## Throughput of the library over the raw floor", "## Details", "## Cleanup while a caller replays", "## Replay at scale", "fsync="} {
		require.Contains(t, out.String(), section)
	}

	// Every schema the run made is gone.
	require.Len(t, res.schemas, 3)
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var left int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = ANY($1)`, res.schemas).Scan(&left))
	require.Zero(t, left)
}

// TestRunRefusesBadConfig checks that nonsense is refused with a typed
// error naming the field, before any database is touched.
func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for field, cfg := range map[string]*Config{
		"Duration":        {Duration: -time.Second},
		"Warmup":          {Warmup: -time.Second},
		"Rounds":          {Rounds: -1},
		"Records":         {Records: 7},
		"ResultBytes":     {ResultBytes: -1},
		"Clients":         {Clients: []int{1, 0}},
		"Cases":           {Cases: []string{"execute-hit", "nope"}},
		"ScaleRecords":    {Cases: []string{CaseScale}, Records: 1000, ScaleRecords: 1000},
		"ScaleOutClients": {ScaleOutClients: []int{8, 0}},
	} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			cfg.DatabaseURL = "postgres://nowhere.invalid/none"
			err := Run(t.Context(), cfg)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, field, ce.Field)
			require.True(t, strings.HasPrefix(err.Error(), "benchpath: config "+field+": "), err.Error())
		})
	}
}

// withoutScaleOut is cases less CaseScaleOut, which needs Citus and has a
// test of its own.
func withoutScaleOut(cases []string) []string {
	return slices.DeleteFunc(slices.Clone(cases), func(c string) bool { return c == CaseScaleOut })
}
