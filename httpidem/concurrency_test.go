package httpidem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// concurrent is how many identical requests race in the tests below.
const concurrent = 50

// watchedStore is a real store that tells the test when the middleware
// waits for a claim or renews one, so that tests synchronise on events
// instead of sleeping. Every call goes to the store underneath.
type watchedStore struct {
	store.CallStore
	waits  chan struct{} // one value per Wait call
	renews chan struct{} // one value per successful Renew
	// refused gets the error of every refused Renew, while it has room.
	refused chan error
}

func watch(st store.CallStore) *watchedStore {
	return &watchedStore{CallStore: st, waits: make(chan struct{}, 10*concurrent), renews: make(chan struct{}, 1000), refused: make(chan error, 100)}
}

func (s *watchedStore) Wait(ctx context.Context, scope string, key keyhash.Sum, token int64) error {
	select {
	case s.waits <- struct{}{}:
	default:
	}
	return s.CallStore.Wait(ctx, scope, key, token)
}

func (s *watchedStore) Renew(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	nc, err := s.CallStore.Renew(ctx, c, lease)
	if err == nil {
		select {
		case s.renews <- struct{}{}:
		default:
		}
	} else {
		select {
		case s.refused <- err:
		default:
		}
	}
	return nc, err
}

// blockingOrders is orders whose handler says it entered, then holds on
// until release is closed.
type blockingOrders struct {
	orders
	entered chan struct{}
	release chan struct{}
}

func newBlockingOrders() *blockingOrders {
	return &blockingOrders{entered: make(chan struct{}, concurrent), release: make(chan struct{})}
}

func (b *blockingOrders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	b.orders.ServeHTTP(w, r)
}

func TestConcurrentIdenticalRequestsRunTheHandlerOnceAndTheOthersGet409(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := newBlockingOrders()
		srv := serve(t, newMiddleware(t, b.st, nil), h)
		ctx := testContext(t)

		answers := make(chan answer, concurrent)
		errs := make(chan error, concurrent)
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				a, err := trySend(ctx, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
				if err != nil {
					errs <- err
					return
				}
				answers <- a
			})
		}
		// The handler that got the claim holds on until every other
		// request has been answered: they all met the claim in flight.
		var conflicts []answer
		for len(conflicts) < concurrent-1 {
			select {
			case a := <-answers:
				conflicts = append(conflicts, a)
			case err := <-errs:
				require.NoError(t, err)
			case <-ctx.Done():
				require.FailNow(t, "timed out", "%d answers", len(conflicts))
			}
		}
		close(h.release)
		wg.Wait()
		close(answers)
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		first := <-answers
		require.Equal(t, http.StatusCreated, first.Status)
		for _, a := range conflicts {
			require.Equal(t, http.StatusConflict, a.Status)
			require.Equal(t, "1", a.Header.Get("Retry-After"))
			require.Equal(t, httpidem.CodeInFlight, problemOf(t, a).Code)
		}
		require.Equal(t, int64(1), h.runs.Load(), "exactly one handler run")

		retry := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
		require.Equal(t, first.Body, retry.Body, "a retry after Retry-After replays")
	})
}

func TestConcurrentIdenticalRequestsInWaitModeAllGetTheSameResponse(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		ws := watch(b.st)
		h := newBlockingOrders()
		srv := serve(t, newMiddleware(t, ws, &httpidem.Config{WaitForInFlight: true, MaxWait: testTimeout}), h)
		ctx := testContext(t)

		answers := make(chan answer, concurrent)
		errs := make(chan error, concurrent)
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				a, err := trySend(ctx, srv, http.MethodPost, "/orders", sfKey("k"), `{"item":"book"}`)
				if err != nil {
					errs <- err
					return
				}
				answers <- a
			})
		}
		// Every other request waits for the claim's holder before it is
		// let go.
		for range concurrent - 1 {
			select {
			case <-ws.waits:
			case err := <-errs:
				require.NoError(t, err)
			case <-ctx.Done():
				require.FailNow(t, "timed out waiting for the waiters")
			}
		}
		close(h.release)
		wg.Wait()
		close(answers)
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		var replays int
		var first *answer
		for a := range answers {
			require.Equal(t, http.StatusCreated, a.Status, a.Body)
			if first == nil {
				first = &a
			}
			require.Equal(t, first.Body, a.Body, "every request gets the one response")
			require.Equal(t, "/orders/1", a.Header.Get("Location"))
			if a.Header.Get("Idempotent-Replayed") == "true" {
				replays++
			}
		}
		require.Equal(t, concurrent-1, replays)
		require.Equal(t, int64(1), h.runs.Load(), "exactly one handler run")
	})
}

func TestWaitModeGives409WhenTheWaitRunsOut(t *testing.T) {
	t.Parallel()
	ws := watch(newMemStore(t))
	h := newBlockingOrders()
	srv := serve(t, newMiddleware(t, ws, &httpidem.Config{WaitForInFlight: true, MaxWait: 50 * time.Millisecond, RetryAfter: 1500 * time.Millisecond}), h)
	ctx := testContext(t)

	done := make(chan answer, 1)
	go func() {
		a, _ := trySend(ctx, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		done <- a
	}()
	<-h.entered
	// The second request waits for the first (held by the handler) and
	// gives up after MaxWait.
	second := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusConflict, second.Status)
	require.Equal(t, "2", second.Header.Get("Retry-After"), "rounded up to whole seconds")
	close(h.release)
	require.Equal(t, http.StatusCreated, (<-done).Status)
	require.Equal(t, int64(1), h.runs.Load())
}

func TestManyKeysRunConcurrently(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		h := &orders{}
		srv := serve(t, newMiddleware(t, b.st, nil), h)
		ctx := testContext(t)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				a, err := trySend(ctx, srv, http.MethodPost, "/orders", sfKey("k"+strconv.Itoa(i)), `{}`)
				if err == nil && a.Status != http.StatusCreated {
					t.Errorf("key %d: status %d", i, a.Status)
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(20), h.runs.Load())
	})
}

func TestAnEndedRequestContextWhileWaitingGets409NotA200(t *testing.T) {
	t.Parallel()
	ws := watch(newMemStore(t))
	h := newBlockingOrders()
	m := newMiddleware(t, ws, &httpidem.Config{WaitForInFlight: true, MaxWait: 10 * time.Second})
	srv := serve(t, m, h)
	// The second request's context ends long before MaxWait: the service
	// set a deadline, and its client is still waiting for an answer.
	timed := httptest.NewServer(withDeadline(250*time.Millisecond, m.Wrap(h)))
	t.Cleanup(timed.Close)
	ctx := testContext(t)
	// Let the handler go even when the test fails early, before the
	// servers close (cleanups run last first): Close waits for it.
	release := sync.OnceFunc(func() { close(h.release) })
	t.Cleanup(release)

	done := make(chan answer, 1)
	go func() {
		a, _ := trySend(ctx, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		done <- a
	}()
	<-h.entered
	second := send(t, timed, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusConflict, second.Status, "answered as when MaxWait runs out, not 200 with an empty body")
	require.Equal(t, "1", second.Header.Get("Retry-After"))
	require.Equal(t, httpidem.CodeInFlight, problemOf(t, second).Code)
	select {
	case <-ws.waits:
	default:
		require.Fail(t, "the second request never waited for the first")
	}
	release()
	require.Equal(t, http.StatusCreated, (<-done).Status)
	require.Equal(t, int64(1), h.runs.Load())
}
