package httpidem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// txOrders is a handler whose side effect is a row in the store's own
// database: it inserts the order and stores its response in one
// transaction (CommitTx), or lets hooks fail it on the way.
type txOrders struct {
	b *backend
	// beforeStore runs after the insert, before the response is stored; an
	// error ends the request with 500 (the transaction rolls back).
	beforeStore func(ctx context.Context) error
	// commitItself stores with CompleteTx and commits (or, with
	// rollBack, rolls back) itself.
	commitItself, rollBack bool
	// sendStatus, when set, is sent instead of the status stored.
	sendStatus int
	// panics is how many runs panic once their response is stored:
	// before their own commit with commitItself (after it with
	// panicAfterCommit), after CommitTx without.
	panics           atomic.Int32
	panicAfterCommit bool
	// commitFirst commits tx before CommitTx (against its contract).
	commitFirst bool
}

func createOrdersTable(t *testing.T, b *backend) {
	t.Helper()
	_, err := b.pool.Exec(testContext(t), "CREATE TABLE "+pgx.Identifier{b.schema, "orders"}.Sanitize()+
		" (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, item text NOT NULL)")
	require.NoError(t, err)
}

func (b *backend) orderCount(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(testContext(t), "SELECT count(*) FROM "+pgx.Identifier{b.schema, "orders"}.Sanitize()).Scan(&n))
	return n
}

func (o *txOrders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := o.place(ctx, w, r); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (o *txOrders) place(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	var in struct{ Item string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return err
	}
	tx, err := o.b.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var id int64
	if err := tx.QueryRow(ctx, "INSERT INTO "+pgx.Identifier{o.b.schema, "orders"}.Sanitize()+" (item) VALUES ($1) RETURNING id", in.Item).Scan(&id); err != nil {
		return err
	}
	if o.beforeStore != nil {
		if err := o.beforeStore(ctx); err != nil {
			return err
		}
	}
	body, _ := json.Marshal(map[string]any{"order_id": id, "item": in.Item})
	resp := httpidem.Response{Status: http.StatusCreated, Header: http.Header{
		"Content-Type": {"application/json"},
		"Location":     {"/orders/" + strconv.FormatInt(id, 10)},
		"X-Trace":      {"not stored"},
	}, Body: body}
	if o.commitItself {
		if err := httpidem.CompleteTx(ctx, tx, o.b.pg, resp); err != nil {
			return err
		}
		if !o.panicAfterCommit && o.panics.Add(-1) >= 0 {
			panic("after CompleteTx, before the commit")
		}
		if o.rollBack {
			if err := tx.Rollback(ctx); err != nil {
				return err
			}
		} else if err := tx.Commit(ctx); err != nil {
			return err
		}
		if o.panicAfterCommit && o.panics.Add(-1) >= 0 {
			panic("after CompleteTx and the commit")
		}
	} else {
		if o.commitFirst {
			if err := tx.Commit(ctx); err != nil {
				return err
			}
		}
		if err := httpidem.CommitTx(ctx, tx, o.b.pg, resp); err != nil {
			return err
		}
		if o.panics.Add(-1) >= 0 {
			panic("after CommitTx")
		}
	}
	if o.sendStatus != 0 {
		resp.Status = o.sendStatus
	}
	return resp.Write(w)
}

func TestATransactionalHandlerStoresItsResponseWithItsWrite(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	srv := serve(t, newMiddleware(t, b.st, nil), &txOrders{b: b})

	first := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	require.Equal(t, "not stored", first.Header.Get("X-Trace"), "the first response is what the handler wrote")
	again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
	require.Equal(t, first.Body, again.Body)
	require.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
	require.Empty(t, again.Header.Get("X-Trace"), "cut to the allow-list")
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, b.orderCount(t))

	rec, found := b.record(t, "", "k")
	require.True(t, found)
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts)
}

func TestATransactionThatFailsBeforeItsCommitLeavesNothingAndRunsAgain(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	fail := true
	var mu sync.Mutex
	h := &txOrders{b: b, beforeStore: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return errors.New("payment service down")
		}
		return nil
	}}
	srv := serve(t, newMiddleware(t, b.st, nil), h)
	require.Equal(t, http.StatusInternalServerError, send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`).Status)
	require.Zero(t, b.orderCount(t), "the insert rolled back")

	again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
	require.Equal(t, http.StatusCreated, again.Status)
	require.Empty(t, again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, b.orderCount(t))
}

func TestAHandlerThatCommitsItselfIsReadBack(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)

	committed := serve(t, newMiddleware(t, b.st, nil), &txOrders{b: b, commitItself: true})
	first := send(t, committed, http.MethodPost, "/orders", sfKey("k1"), `{"item":"book"}`)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	again := send(t, committed, http.MethodPost, "/orders", sfKey("k1"), `{"item":"book"}`)
	require.Equal(t, first.Body, again.Body)
	require.Equal(t, 1, b.orderCount(t))

	rolledBack := serve(t, newMiddleware(t, b.st, nil), &txOrders{b: b, commitItself: true, rollBack: true})
	a := send(t, rolledBack, http.MethodPost, "/orders", sfKey("k2"), `{"item":"pen"}`)
	require.Equal(t, http.StatusCreated, a.Status, "the handler (wrongly) sent 201 for a rolled-back write")
	rec, found := b.record(t, "", "k2")
	require.True(t, found)
	require.Equal(t, store.StatusReleased, rec.Status, "the read-back found nothing stored: the claim is released, not completed with what was sent")
	require.Equal(t, 1, b.orderCount(t))
}

// A handler that panics once its response is stored in its transaction
// leaves the key as its commit did, as one that returns does: committed,
// the retry replays the stored response; rolled back by the panic, the
// claim is released and the retry runs the handler. (The rolled-back claim
// was left to its lease, and every retry got 409 until it ended.)
func TestAHandlerThatPanicsAfterStoringLeavesTheKeyAsItsCommitDid(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	for name, c := range map[string]struct {
		h        *txOrders
		replayed bool
	}{
		"CompleteTx, panic before the commit": {&txOrders{b: b, commitItself: true}, false},
		"CompleteTx, panic after the commit":  {&txOrders{b: b, commitItself: true, panicAfterCommit: true}, true},
		"CommitTx, panic after it":            {&txOrders{b: b}, true},
	} {
		c.h.panics.Store(1)
		srv := serve(t, newMiddleware(t, b.st, nil), c.h)
		key := sfKey(name)
		before := b.orderCount(t)
		_, err := trySend(testContext(t), srv, http.MethodPost, "/orders", key, `{"item":"book"}`)
		require.Error(t, err, "%s: the panic goes on to net/http, which ends the connection", name)

		rec, found := b.record(t, "", name)
		require.True(t, found, name)
		again := send(t, srv, http.MethodPost, "/orders", key, `{"item":"book"}`)
		require.Equal(t, http.StatusCreated, again.Status, name)
		require.Equal(t, 1, b.orderCount(t)-before, "%s: one order", name)
		if c.replayed {
			require.Equal(t, store.StatusCompleted, rec.Status, name)
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "%s: the retry replays what was committed", name)
		} else {
			require.Equal(t, store.StatusReleased, rec.Status, "%s: the claim was released, not left to its lease", name)
			require.Empty(t, again.Header.Get("Idempotent-Replayed"), "%s: the retry runs the handler", name)
		}
	}
}

// A handler that commits its transaction before handing it to CommitTx has
// its write committed without the response: the outcome is unknown, so the
// claim is kept to its lease, not released, and a retry meanwhile does not
// run the handler (and write) again.
func TestAHandlerThatCommitsBeforeCommitTxLeavesTheOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	srv := serve(t, newMiddleware(t, b.st, nil), &txOrders{b: b, commitFirst: true})
	a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
	require.Equal(t, http.StatusInternalServerError, a.Status)
	require.Contains(t, a.Body, "outcome unknown")
	require.Equal(t, 1, b.orderCount(t), "the handler's own commit went through")

	rec, found := b.record(t, "", "k")
	require.True(t, found)
	require.Equal(t, store.StatusPending, rec.Status, "the claim is kept to its lease, not released")
	again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
	require.Equal(t, http.StatusConflict, again.Status, "in flight until the lease ends")
	require.Equal(t, 1, b.orderCount(t), "the handler did not run again")
}

func TestAStaleHandlerCannotCommitOverATakeover(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	// The handler's claim is taken over (an operator releases it; a lease
	// ending is the same to the fencing token) before it stores: its
	// CompleteTx is refused, so its insert rolls back.
	h := &txOrders{b: b}
	h.beforeStore = func(ctx context.Context) error {
		info, _ := httpidem.RequestInfoFrom(ctx)
		_, err := b.pg.ResolveRelease(ctx, info.Scope, info.Entry.Key, info.Claim.Token, "test: taken away")
		return err
	}
	srv := serve(t, newMiddleware(t, b.st, nil), h)
	a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
	require.Equal(t, http.StatusInternalServerError, a.Status)
	require.Contains(t, a.Body, "lease lost")
	require.Zero(t, b.orderCount(t))
}

func TestTxHelpersOutsideAnIdempotentRequestOnlyCommit(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	srv := serve(t, newMiddleware(t, b.st, &httpidem.Config{AllowMissingKey: true}), &txOrders{b: b})
	for range 2 {
		require.Equal(t, http.StatusCreated, send(t, srv, http.MethodPost, "/orders", "", `{"item":"book"}`).Status)
	}
	require.Equal(t, 2, b.orderCount(t), "no key: every request runs and commits")
}

func TestTxHelpersRefuseAResponseTheConfigDoesNotStore(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	errs := make(chan error, 1)
	srv := serve(t, newMiddleware(t, b.st, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := b.pool.Begin(r.Context())
		if err != nil {
			errs <- err
			return
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(r.Context())) }()
		errs <- httpidem.CommitTx(r.Context(), tx, b.pg, httpidem.Response{Status: http.StatusBadGateway})
		w.WriteHeader(http.StatusBadGateway)
	}))
	require.Equal(t, http.StatusBadGateway, send(t, srv, http.MethodPost, "/x", sfKey("k"), `{}`).Status)
	require.ErrorIs(t, <-errs, httpidem.ErrNotStorable)
}

func TestAHandlerThatSendsAnotherResponseThanItStoredIsLogged(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	var logs syncBuffer
	m := newMiddleware(t, b.st, &httpidem.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv := serve(t, m, &txOrders{b: b, sendStatus: http.StatusOK})
	require.Equal(t, http.StatusOK, send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`).Status)
	require.Equal(t, http.StatusCreated, send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`).Status, "retries get what was stored")
	require.Contains(t, logs.String(), "stored one response and sent another")
}

// syncBuffer is a bytes.Buffer safe for a logger on server goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// txStoreFunc is a TxStore of a function, for the nil checks.
type txStoreFunc func(context.Context, nopTx, store.Claim, store.Outcome) (store.Record, error)

func (f txStoreFunc) CompleteTx(ctx context.Context, tx nopTx, c store.Claim, out store.Outcome) (store.Record, error) {
	return f(ctx, tx, c, out)
}

// nopTx is a transaction that commits nothing, for the nil checks.
type nopTx struct{}

func (nopTx) Commit(context.Context) error { return nil }

func TestTxHelpersRefuseANilContextTxOrStoreAndStoreNothing(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	m := newMiddleware(t, st, nil)
	var errs []error
	infoOK := true
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		resp := httpidem.Response{Status: http.StatusCreated}
		var nilStore httpidem.TxStore[nopTx]
		var nilTx httpidem.Committer
		var typedTx *nopTx
		var nilCtx context.Context
		txSt := txStoreFunc(func(context.Context, nopTx, store.Claim, store.Outcome) (store.Record, error) {
			return store.Record{}, nil
		})
		errs = append(errs,
			httpidem.CommitTx(ctx, nopTx{}, nilStore, resp),
			httpidem.CompleteTx(ctx, nopTx{}, nilStore, resp),
			httpidem.CommitTx[httpidem.Committer](ctx, nilTx, nil, resp),
			httpidem.CommitTx[*nopTx](ctx, typedTx, nil, resp),
			httpidem.CommitTx(nilCtx, nopTx{}, txSt, resp),
			httpidem.CompleteTx(nilCtx, nopTx{}, txSt, resp),
		)
		_, ok := httpidem.RequestInfoFrom(nilCtx)
		infoOK = ok
		w.WriteHeader(http.StatusInternalServerError)
	})
	srv := serve(t, m, h)
	require.Equal(t, http.StatusInternalServerError, send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`).Status)
	require.Len(t, errs, 6)
	require.False(t, infoOK, "RequestInfoFrom(nil) panicked")
	for i, err := range errs {
		var ie *contract.InputError
		require.ErrorAs(t, err, &ie, i)
	}
	_, err := st.Get(testContext(t), httpidem.Scope("", "k"), keyhash.IDKey("k"))
	require.ErrorIs(t, err, store.ErrNotFound, "nothing stored")
	good := send(t, serve(t, m, &orders{}), http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusCreated, good.Status, "the claim was released: a good request runs")
	require.Empty(t, good.Header.Get("Idempotent-Replayed"))
}

// CommitTx cuts a response's headers as the middleware does, line breaks
// included: net/http sends them as spaces, and that is what is stored. It
// refused such a value (an *EncodingError), so a handler whose Location
// held a line break (an id from the client, say) rolled back its write
// and failed on every retry, where the same handler without CommitTx had
// its response stored and replayed.
func TestCommitTxStoresAHeaderWithALineBreakAsSentAndReplaysIt(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	var runs atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		ctx := r.Context()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		_, err = tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{b.schema, "orders"}.Sanitize()+" (item) VALUES ('book')")
		require.NoError(t, err)
		resp := httpidem.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/orders/1\r\nX-Evil: 1"}}}
		if err := httpidem.CommitTx(ctx, tx, b.pg, resp); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		require.NoError(t, resp.Write(w))
	})
	srv := serve(t, newMiddleware(t, b.st, nil), h)
	first := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusCreated, again.Status, again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
	require.Empty(t, again.Header.Get("X-Evil"))
	require.Equal(t, int64(1), runs.Load())
	require.Equal(t, 1, b.orderCount(t))
}

// A lease renewal that lands after CommitTx committed the response, while
// the handler still runs, finds the claim completed under its own token:
// the request's success, not a lost lease, and nothing is logged saying
// otherwise. A lease really lost (the key completed under another
// request's claim) is still warned about.
func TestACommitRacingARenewalLogsNoLeaseLost(t *testing.T) {
	t.Parallel()
	b := newPGBackend(t)
	createOrdersTable(t, b)
	ws := watch(b.st)
	var logs syncBuffer
	m := newMiddleware(t, ws, &httpidem.Config{Lease: time.Minute, RenewEvery: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	refused := make(chan error, 2)
	// handOver, set, is done instead of CommitTx: the key goes to another
	// request, which completes it.
	var handOver func(ctx context.Context, info httpidem.RequestInfo) error
	srv := serve(t, m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		resp := httpidem.Response{Status: http.StatusCreated, Body: []byte(`{"item":"book"}`)}
		var err error
		if handOver != nil {
			info, _ := httpidem.RequestInfoFrom(ctx)
			err = handOver(ctx, info)
		} else {
			err = insertAndCommit(ctx, b, resp)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// The handler goes on until a renewal was refused: the race,
		// made certain.
		select {
		case err := <-ws.refused:
			refused <- err
		case <-ctx.Done():
			refused <- ctx.Err()
		}
		_ = resp.Write(w)
	}))

	require.Equal(t, http.StatusCreated, send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`).Status)
	require.ErrorIs(t, <-refused, store.ErrLeaseLost, "the renewal found no pending claim")
	require.Equal(t, 1, b.orderCount(t))
	require.NotContains(t, logs.String(), "lease lost", "the request completed: no lease was lost")
	require.NotContains(t, logs.String(), "level=WARN")

	handOver = func(ctx context.Context, info httpidem.RequestInfo) error {
		if err := b.st.Release(ctx, info.Claim, "handed to another request"); err != nil {
			return err
		}
		cr, err := b.st.Claim(ctx, info.Scope, info.Entry, time.Minute, store.WriteOptions{})
		if err != nil {
			return err
		}
		_, err = b.st.Complete(ctx, cr.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte(`{}`)})
		return err
	}
	require.Equal(t, http.StatusCreated, send(t, srv, http.MethodPost, "/orders", sfKey("other"), `{}`).Status)
	require.ErrorIs(t, <-refused, store.ErrLeaseLost)
	require.Contains(t, logs.String(), "lease lost while the handler runs")
}

// insertAndCommit inserts an order and stores resp with it (CommitTx).
func insertAndCommit(ctx context.Context, b *backend, resp httpidem.Response) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{b.schema, "orders"}.Sanitize()+" (item) VALUES ('book')"); err != nil {
		return err
	}
	return httpidem.CommitTx(ctx, tx, b.pg, resp)
}

// Config.MaxResponseBytes bounds the response body stored, whichever way
// it is stored. CommitTx and CompleteTx checked only the store's
// MaxResultBytes, so a handler storing its response in its own
// transaction had a body over MaxResponseBytes stored and replayed, where
// the same response written to w is not stored (the claim is released,
// and a retry runs the handler again).
func TestTxHelpersRefuseABodyOverMaxResponseBytesAndStoreNothing(t *testing.T) {
	t.Parallel()
	st := newMemStore(t)
	m := newMiddleware(t, st, &httpidem.Config{MaxResponseBytes: 8})
	// The store's own CompleteTx, as pgstore's would run it inside tx.
	txSt := txStoreFunc(func(ctx context.Context, _ nopTx, c store.Claim, out store.Outcome) (store.Record, error) {
		return st.Complete(ctx, c, out)
	})
	var runs atomic.Int64
	errs := make(chan error, 4)
	for name, helper := range map[string]func(context.Context, httpidem.Response) error{
		"CommitTx": func(ctx context.Context, resp httpidem.Response) error {
			return httpidem.CommitTx(ctx, nopTx{}, txSt, resp)
		},
		"CompleteTx": func(ctx context.Context, resp httpidem.Response) error {
			return httpidem.CompleteTx(ctx, nopTx{}, txSt, resp)
		},
	} {
		srv := serve(t, m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			resp := httpidem.Response{Status: http.StatusCreated, Body: []byte("123456789")} // 9 bytes
			if err := helper(r.Context(), resp); err != nil {
				errs <- err
				http.Error(w, "not stored", http.StatusInternalServerError)
				return
			}
			errs <- nil
			_ = resp.Write(w)
		}))
		key := sfKey(name)
		runs.Store(0)
		first := send(t, srv, http.MethodPost, "/orders", key, `{}`)
		require.Equal(t, http.StatusInternalServerError, first.Status, name)
		err := <-errs
		var le *contract.LimitError
		require.ErrorAs(t, err, &le, name)
		require.Equal(t, contract.LimitError{Limit: "MaxResponseBytes", Value: 9, Max: 8}, *le, name)
		require.ErrorIs(t, err, contract.ErrTooLarge, name)

		_, gerr := st.Get(testContext(t), httpidem.Scope("", name), keyhash.IDKey(name))
		require.ErrorIs(t, gerr, store.ErrNotFound, "%s: nothing stored", name)
		again := send(t, srv, http.MethodPost, "/orders", key, `{}`)
		require.Empty(t, again.Header.Get("Idempotent-Replayed"), name)
		require.Equal(t, int64(2), runs.Load(), "%s: the claim was released, so a retry runs the handler", name)
		<-errs
	}
}
