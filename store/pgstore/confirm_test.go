package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// sqlRecorder is a pgx tracer that keeps the statements a pool sends.
type sqlRecorder struct {
	mu  sync.Mutex
	sql []string
}

func (r *sqlRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.sql = append(r.sql, d.SQL)
	r.mu.Unlock()
	return ctx
}

func (r *sqlRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements sent since the last take.
func (r *sqlRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sql
	r.sql = nil
	return s
}

// With ConfirmReads, every operation that hands out a stored outcome has it
// read by a statement that waits for the synchronous standby (a row lock,
// FOR SHARE): Get, GetMany, Claim, a Claim hinted as likely new, ClaimMany
// and Put of a stored call alike.
func TestConfirmedReadsConfirmEveryReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rec sqlRecorder
	_, schema := newSchema(t)
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = &rec })
	st := openStore(t, pool, schema, &pgstore.Config{ConfirmReads: true})
	e := store.Entry{Key: keyhash.IDKey("stored"), Fingerprint: keyhash.Fingerprint("tool", []byte(`{}`)), Tool: "tool"}
	_, _, err := st.Put(ctx, "run", e, store.Outcome{Kind: store.KindSuccess, Result: []byte("result")}, store.WriteOptions{})
	require.NoError(t, err)

	replayed := func(res store.ClaimResult) {
		t.Helper()
		require.NoError(t, res.Err)
		require.Equal(t, store.ClaimCompleted, res.State)
		require.Equal(t, "result", string(res.Record.Outcome.Result))
	}
	for name, op := range map[string]func(){
		"Get": func() {
			got, err := st.Get(ctx, "run", e.Key)
			require.NoError(t, err)
			require.Equal(t, "result", string(got.Outcome.Result))
		},
		"GetMany": func() {
			got, err := st.GetMany(ctx, "run", []keyhash.Sum{e.Key})
			require.NoError(t, err)
			require.Len(t, got, 1)
		},
		"Claim": func() {
			res, err := st.Claim(ctx, "run", e, time.Minute, store.WriteOptions{})
			require.NoError(t, err)
			replayed(res)
		},
		"Claim hinted": func() {
			res, err := st.Claim(ctx, "run", e, time.Minute, store.WriteOptions{LikelyNew: true})
			require.NoError(t, err)
			replayed(res)
		},
		"ClaimMany": func() {
			other := store.Entry{Key: keyhash.IDKey("new"), Fingerprint: e.Fingerprint, Tool: "tool"}
			res, err := st.ClaimMany(ctx, "run", []store.Entry{e, other}, time.Minute, store.WriteOptions{})
			require.NoError(t, err)
			replayed(res[0])
			require.Equal(t, store.ClaimGranted, res[1].State, "a claim granted beside a confirmed replay stands")
		},
		"Put": func() {
			_, stored, err := st.Put(ctx, "run", e, store.Outcome{Kind: store.KindSuccess, Result: []byte("other")}, store.WriteOptions{})
			require.NoError(t, err)
			require.False(t, stored)
		},
	} {
		rec.take()
		op()
		confirmed := false
		for _, sql := range rec.take() {
			if strings.HasSuffix(strings.TrimSpace(sql), "FOR SHARE") {
				confirmed = true
			}
		}
		require.True(t, confirmed, "%s handed out an outcome no confirmed read found", name)
	}
}

// A Claim hinted as likely new of a call already stored replays it and
// leaves its record as it was: claimNewSQL's INSERT finds the key taken
// (ON CONFLICT DO NOTHING), then the read decides. The wrong hint costs one
// statement more; it draws a token and share-locks the scope row, which
// the statement does before the conflict is found (claimNewSQL says why it
// does not probe the key first), and changes no record. A new call's
// hinted claim is one statement.
func TestHintedClaimOfAStoredCallChangesNoRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rec sqlRecorder
	_, schema := newSchema(t)
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = &rec })
	st := openStore(t, pool, schema, nil)
	e := store.Entry{Key: keyhash.IDKey("stored"), Fingerprint: keyhash.Fingerprint("tool", []byte(`{}`)), Tool: "tool"}
	stored, _, err := st.Put(ctx, "run", e, store.Outcome{Kind: store.KindSuccess, Result: []byte("result")}, store.WriteOptions{})
	require.NoError(t, err)

	state := func() (seq int64, scopeExpiry time.Time, recordXmin string, records int) {
		t.Helper()
		q := pgx.Identifier{schema}.Sanitize()
		require.NoError(t, pool.QueryRow(ctx, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM `+q+`.idem_token_seq`).Scan(&seq))
		require.NoError(t, pool.QueryRow(ctx, `SELECT expires_at FROM `+q+`.idem_scopes WHERE scope = 'run'`).Scan(&scopeExpiry))
		require.NoError(t, pool.QueryRow(ctx, `SELECT xmin::text FROM `+q+`.idem_records WHERE scope = 'run' AND key = $1`, e.Key[:]).Scan(&recordXmin))
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+q+`.idem_records`).Scan(&records))
		return seq, scopeExpiry, recordXmin, records
	}
	_, expiry, recordXmin, records := state()
	rec.take()
	res, err := st.Claim(ctx, "run", e, time.Minute, store.WriteOptions{LikelyNew: true})
	require.NoError(t, err)
	require.Len(t, rec.take(), 2, "the insert that finds the key taken, then the read")
	require.Equal(t, store.ClaimCompleted, res.State)
	require.Equal(t, stored.Token, res.Record.Token)
	require.Equal(t, []byte("result"), res.Record.Outcome.Result)
	seq2, expiry2, recordXmin2, records2 := state()
	require.Equal(t, recordXmin, recordXmin2, "the record not rewritten")
	require.Equal(t, records, records2, "no record inserted")
	require.True(t, expiry.Equal(expiry2), "the live scope's expiry as it was")

	// And a new call's hinted claim does insert, in one statement.
	rec.take()
	res, err = st.Claim(ctx, "run", store.Entry{Key: keyhash.IDKey("new"), Fingerprint: e.Fingerprint, Tool: "tool"}, time.Minute, store.WriteOptions{LikelyNew: true})
	require.NoError(t, err)
	require.Len(t, rec.take(), 1, "one statement")
	require.Equal(t, store.ClaimGranted, res.State)
	require.Equal(t, 1, res.Claim.Attempt)
	require.False(t, res.TakenOver)
	seq3, _, _, _ := state()
	require.Greater(t, seq3, seq2)
}
