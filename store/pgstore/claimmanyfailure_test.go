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

	"github.com/idemstore/idemstore/store"
)

// cancelAfterFirstLook cancels the context it was given once a statement
// whose SQL contains marker has answered: the caller gives up between a
// ClaimMany's two statements.
type cancelAfterFirstLook struct {
	mu     sync.Mutex
	marker string
	last   string
	cancel context.CancelFunc
}

func (c *cancelAfterFirstLook) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.last = d.SQL
	c.mu.Unlock()
	return ctx
}

func (c *cancelAfterFirstLook) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.Err == nil && c.cancel != nil && c.marker != "" && strings.Contains(c.last, c.marker) {
		c.cancel()
	}
}

// A ClaimMany whose second statement fails (here: the caller's context
// ends after the first granted the new call's claim, before the released
// record's key is claimed by idem_claim_many) returns the claim the first
// statement granted, as granted, and the failure in the other entry's Err:
// a claim the database holds is handed to the caller, which completes or
// releases it, instead of being dropped with the batch and held until its
// lease ends, with the call's next claim waiting for it.
func TestTurnWhoseSecondStatementFailsKeepsTheClaimsItWasGranted(t *testing.T) {
	t.Parallel()
	tracer := &cancelAfterFirstLook{}
	_, schema := newSchema(t)
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = tracer })
	st := openStore(t, pool, schema, nil)
	bg := context.Background()
	released, fresh := entry("released", `{}`), entry("fresh", `{}`)
	cr, err := st.Claim(bg, "run", released, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, st.Release(bg, cr.Claim, "failed"))

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	tracer.mu.Lock()
	tracer.cancel, tracer.marker = cancel, "ON CONFLICT (scope, key) DO NOTHING" // the hinted first statement
	tracer.mu.Unlock()
	res, err := st.ClaimMany(ctx, "run", []store.Entry{released, fresh}, time.Minute, store.WriteOptions{LikelyNew: true})
	require.NoError(t, err, "the batch is returned: one of its claims was granted")
	require.Len(t, res, 2)
	require.ErrorIs(t, res[0].Err, context.Canceled, "the released record's claim was not sent")
	require.NoError(t, res[1].Err)
	require.Equal(t, store.ClaimGranted, res[1].State)

	// The claim handed back is the database's: it completes.
	rec, err := st.Complete(bg, res[1].Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("done")})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)

	// Without a claim granted, the failure is the batch's, as before.
	tracer.mu.Lock()
	ctx2, cancel2 := context.WithCancel(bg)
	defer cancel2()
	tracer.cancel = cancel2
	tracer.mu.Unlock()
	res, err = st.ClaimMany(ctx2, "run", []store.Entry{released}, time.Minute, store.WriteOptions{LikelyNew: true})
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, res)
}
