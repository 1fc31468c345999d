package httpidem_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

func TestASlowHandlerKeepsItsKeyByRenewingTheLease(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		const (
			lease   = time.Second
			every   = 100 * time.Millisecond
			renewed = 15 // 1.5 s of renewals: well past the first lease
		)
		ws := watch(b.st)
		h := newBlockingOrders()
		srv := serve(t, newMiddleware(t, ws, &httpidem.Config{Lease: lease, RenewEvery: every}), h)
		ctx := testContext(t)

		done := make(chan answer, 1)
		go func() {
			a, _ := trySend(ctx, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
			done <- a
		}()
		<-h.entered
		for range renewed {
			select {
			case <-ws.renews:
			case <-ctx.Done():
				require.FailNow(t, "no renewal")
			}
		}
		// The first lease has long ended; renewed, the claim is still live,
		// so the retry is told to wait instead of running the handler too.
		retry := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		require.Equal(t, http.StatusConflict, retry.Status)
		close(h.release)
		require.Equal(t, http.StatusCreated, (<-done).Status)
		require.Equal(t, int64(1), h.runs.Load())
	})
}

func TestADeadServersClaimIsTakenOverAfterItsLease(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		ctx := testContext(t)
		const lease = 200 * time.Millisecond
		// A server that claimed the key and died: its claim is never
		// completed, released or renewed.
		req, err := http.NewRequest(http.MethodPost, "http://x/orders", nil)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		ent := store.Entry{Key: keyhash.IDKey("k"), Fingerprint: httpidem.Fingerprint(req, []byte(`{}`), httpidem.DefaultFingerprintHeaders), Tool: "POST /orders"}
		cr, err := b.st.Claim(ctx, httpidem.Scope("", "k"), ent, lease, store.WriteOptions{})
		require.NoError(t, err)
		require.Equal(t, store.ClaimGranted, cr.State)

		var info httpidem.RequestInfo
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			info, _ = httpidem.RequestInfoFrom(r.Context())
			w.WriteHeader(http.StatusCreated)
		})
		srv := serve(t, newMiddleware(t, b.st, &httpidem.Config{WaitForInFlight: true, MaxWait: testTimeout}), h)
		a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		require.Equal(t, http.StatusCreated, a.Status, a.Body)
		require.True(t, info.TakenOver, "the handler learns that an earlier attempt may have run")
		require.Equal(t, 2, info.Claim.Attempt)
		require.Greater(t, info.Claim.Token, cr.Claim.Token)
	})
}

func TestTheHandlerFindsItsRequestInTheContext(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	infos := make(chan httpidem.RequestInfo, 2)
	srv := serve(t, newMiddleware(t, st, &httpidem.Config{AllowMissingKey: true, Principal: func(*http.Request) string { return "acme" }}),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			info, ok := httpidem.RequestInfoFrom(r.Context())
			if ok {
				infos <- info
			}
			w.WriteHeader(http.StatusCreated)
		}))
	send(t, srv, http.MethodPost, "/orders", `"a\"b"`, `{}`)
	info := <-infos
	require.Equal(t, `a"b`, info.Key)
	require.Equal(t, "acme", info.Principal)
	require.Equal(t, "acme\ta\"b", info.Scope)
	require.Equal(t, keyhash.IDKey(`a"b`), info.Entry.Key)
	require.Equal(t, 1, info.Claim.Attempt)
	require.False(t, info.TakenOver)
	require.Equal(t, keyhash.DownstreamKey(info.Scope, info.Entry.Key), info.DownstreamKey())

	send(t, srv, http.MethodPost, "/orders", "", `{}`)
	require.Empty(t, infos, "no key under AllowMissingKey: no request info")
	_, ok := httpidem.RequestInfoFrom(context.Background())
	require.False(t, ok)
}

func TestAStoreThatFailsGets503AndRunsNothing(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	h := &orders{}
	srv := serve(t, newMiddleware(t, b.st, &httpidem.Config{RetryAfter: 3 * time.Second}), h)
	b.pg.Close()
	a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusServiceUnavailable, a.Status)
	require.Equal(t, "3", a.Header.Get("Retry-After"))
	require.Equal(t, httpidem.CodeStoreUnavailable, problemOf(t, a).Code)
	require.Zero(t, h.runs.Load())
}

func TestAnEndedRequestContextGetsA503NotA200AndClaimsNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		// The context has ended before the middleware sees the request:
		// the store's Get fails at once. The client is still there.
		srv := httptest.NewServer(withDeadline(-time.Second, newMiddleware(t, b.st, &httpidem.Config{RetryAfter: 3 * time.Second}).Wrap(h)))
		t.Cleanup(srv.Close)
		a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		require.Equal(t, http.StatusServiceUnavailable, a.Status, "the store-failure problem, not 200 with an empty body")
		require.Equal(t, "3", a.Header.Get("Retry-After"))
		require.Equal(t, httpidem.CodeStoreUnavailable, problemOf(t, a).Code)
		require.Zero(t, h.runs.Load())
		_, found := b.record(t, "", "k")
		require.False(t, found, "no claim is left behind")
	})
}

func TestACorruptStoredResponseGets500(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	req, err := http.NewRequest(http.MethodPost, "http://x/orders", nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	ent := store.Entry{Key: keyhash.IDKey("k"), Fingerprint: httpidem.Fingerprint(req, []byte(`{}`), httpidem.DefaultFingerprintHeaders), Tool: "POST /orders"}
	_, _, err = st.Put(testContext(t), httpidem.Scope("", "k"), ent, store.Outcome{Kind: store.KindSuccess, Result: []byte("not an envelope")}, store.WriteOptions{})
	require.NoError(t, err)

	h := &orders{}
	srv := serve(t, newMiddleware(t, st, nil), h)
	a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusInternalServerError, a.Status)
	require.Equal(t, httpidem.CodeInternal, problemOf(t, a).Code)
	require.Zero(t, h.runs.Load(), "a stored outcome is never run over")
}

// A renewal was bounded by the renewal interval: with a lease of 3ns (1ns
// between renewals) every renewal timed out before it reached the store, a
// warning was logged each time, thousands in a few milliseconds, and the
// lease was never renewed. The shortest lease New takes renews like any
// other.
func TestATinyLeaseRenewsWithoutFloodingTheLog(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		var logs syncBuffer
		ws := watch(b.st)
		m := newMiddleware(t, ws, &httpidem.Config{Lease: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		// Renewed, three renewals come at once; the bound only ends the
		// test sooner when they never come.
		ctx, cancel := context.WithTimeout(testContext(t), 10*time.Second)
		defer cancel()
		srv := serve(t, m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for range 3 {
				select {
				case <-ws.renews:
				case <-ctx.Done():
					http.Error(w, "no renewal", http.StatusInternalServerError)
					return
				}
			}
			w.WriteHeader(http.StatusCreated)
		}))
		a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		require.Equal(t, http.StatusCreated, a.Status, a.Body)
		require.NotContains(t, logs.String(), "renewal failed")
	})
}
