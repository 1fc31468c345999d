package pgstore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store/pgstore"
	"github.com/idemstore/idemstore/store/seal"
)

// The hit path with results sealed (Config.Sealer) against the same
// replay of results in clear: Get of a 1 KiB result, 10,000 records in
// each of two schemas, interleaved as every pair is. Here "raw" is the
// store without a Sealer, so x_raw is what opening the result adds to a
// replay. docs/benchmarks.md.
func BenchmarkSealedReplay(b *testing.B) {
	ctx := context.Background()
	plain := newBenchEnv(b, 10_000)
	sealedEnv := newBenchEnv(b, 10_000)
	sealer, err := seal.New(seal.Config{Current: 1, Keys: map[seal.KeyID][]byte{1: bytes.Repeat([]byte{1}, seal.KeySize)}})
	require.NoError(b, err)
	sealed := openStore(b, sealedEnv.pool, sealedEnv.schema, &pgstore.Config{Sealer: sealer})
	q := pgstore.ResealQuery{Limit: pgstore.MaxResealBatch}
	for {
		batch, err := sealed.Reseal(ctx, q)
		require.NoError(b, err)
		if batch.Done {
			break
		}
		q.After = batch.Next
	}
	// The reseal left a dead version of every row: vacuumed, as the plain
	// schema was after its seeding.
	_, err = sealedEnv.pool.Exec(ctx, "VACUUM ANALYZE "+sealedEnv.table("idem_records"))
	require.NoError(b, err)
	pair(b, func(_, i int) error {
		_, err := plain.st.Get(ctx, "bench", benchKey(i%plain.n))
		return err
	}, func(_, i int) error {
		_, err := sealed.Get(ctx, "bench", benchKey(i%sealedEnv.n))
		return err
	})
}
