package pgstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// lostClaimEntry is a call whose tool name is the fault proxy's marker: only
// the Claim that carries it sends it.
func lostClaimEntry(id, marker string) store.Entry {
	return store.Entry{Key: keyhash.IDKey(id), Fingerprint: keyhash.Fingerprint(marker, []byte(`{}`)), Tool: marker}
}

// A Claim whose statement committed but whose reply was lost (the
// connection died between the commit and the reply) is sent again with the
// same nonce, and gets the claim it was granted: not "in flight" until its
// own lease ends. Another Claim of the call (another nonce) still finds it
// in flight, and the recovered claim completes. Hinted likely new, the
// statement lost is the insert: sent again, it finds the key taken, and the
// read that follows hands back the claim by its nonce.
func TestLostClaimReplyIsRecoveredByItsNonce(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]store.WriteOptions{"not hinted": {}, "likely new": {LikelyNew: true}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			b := faultSetup(t, nil)
			marker := "marker-lost-claim-" + strings.ReplaceAll(name, " ", "-")
			e := lostClaimEntry("id", marker)

			fired := b.proxy.arm(marker, dropReply, nil)
			res, err := b.st.Claim(ctx, "run", e, time.Hour, opts)
			waitFired(ctx, t, fired)
			require.NoError(t, err)
			require.Equal(t, store.ClaimGranted, res.State, "the claim granted before the reply was lost")
			require.Equal(t, 1, res.Claim.Attempt)
			require.False(t, res.TakenOver)
			require.Contains(t, b.log.String(), "retrying after a failure that is safe to retry")
			status, token, _ := b.readRow(ctx, t, "run", e)
			require.Equal(t, int16(store.StatusPending), status)
			require.Equal(t, token, res.Claim.Token, "the one claim the database holds")

			other, err := b.direct.Claim(ctx, "run", e, time.Hour, opts)
			require.NoError(t, err)
			require.Equal(t, store.ClaimInFlight, other.State, "another Claim of the call does not get it")

			_, err = b.st.Complete(ctx, res.Claim, success("done"))
			require.NoError(t, err)
			got, err := b.direct.Get(ctx, "run", e.Key)
			require.NoError(t, err)
			require.Equal(t, []byte("done"), got.Outcome.Result)
		})
	}
}

// The same for a turn's batch, hinted likely new (one set insert of the
// keys) or not (a read, then idem_claim_many): every claim ClaimMany was
// granted comes back, and the entry that was already done is replayed.
func TestLostClaimManyReplyIsRecoveredByItsNonce(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]store.WriteOptions{"not hinted": {}, "likely new": {LikelyNew: true}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			b := faultSetup(t, nil)
			done := entry("done", `{}`)
			c := mustClaim(ctx, t, b.direct, "run", done, time.Hour)
			_, err := b.direct.Complete(ctx, c, success("earlier"))
			require.NoError(t, err)
			first, second := lostClaimEntry("first", "marker-lost-batch"), entry("second", `{}`)

			fired := b.proxy.arm("marker-lost-batch", dropReply, nil)
			res, err := b.st.ClaimMany(ctx, "run", []store.Entry{first, done, second}, time.Hour, opts)
			waitFired(ctx, t, fired)
			require.NoError(t, err)
			require.Len(t, res, 3)
			require.Equal(t, store.ClaimGranted, res[0].State)
			require.Equal(t, store.ClaimCompleted, res[1].State)
			require.Equal(t, []byte("earlier"), res[1].Record.Outcome.Result)
			require.Equal(t, store.ClaimGranted, res[2].State)
			for i, e := range []store.Entry{first, second} {
				_, token, _ := b.readRow(ctx, t, "run", e)
				require.Equal(t, token, res[2*i].Claim.Token)
				require.Equal(t, 1, res[2*i].Claim.Attempt)
				require.False(t, res[2*i].TakenOver)
			}
		})
	}
}
