package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/internal/pgtest"
)

// childLease is the claim lease of the killed servers: a retry gets 409
// for at most this long before it takes the dead server's claim over.
const childLease = time.Second

// TestAServerKilledBetweenTheOrderAndItsStoredResponseCreatesTheOrderOnce
// kills a real server process (SIGKILL) at the two points around the
// commit that joins the order and its response, and retries the request
// with the same key on a new server process, as a client would.
func TestAServerKilledBetweenTheOrderAndItsStoredResponseCreatesTheOrderOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		point string
		// replayed: the retry finds the first attempt's response stored.
		replayed bool
	}{
		// Killed after the insert, before the commit: the transaction dies
		// with the process; nothing was created, the claim is left
		// pending. The retry waits out the lease (409, Retry-After), takes
		// the claim over and creates the order.
		{point: "after-insert", replayed: false},
		// Killed after the commit, before the response was sent: the order
		// and its response are stored; the retry replays them.
		{point: "after-commit", replayed: true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			pool, schema := pgtest.NewSchema(t)
			const key = "order-7f3c"
			body := `{"item":"book","quantity":2}`

			doomed := startChild(t, schema, tc.point)
			_, err := sendOrder(ctx, doomed.url, "cus_42", key, body)
			require.Error(t, err, "the server died before answering")
			require.ErrorContains(t, doomed.wait(t), "signal: killed")

			created := 0
			if tc.replayed {
				created = 1
			}
			require.Equal(t, created, countOrders(t, pool, schema), "the order exists iff its response is stored")

			next := startChild(t, schema, "none")
			a, err := postWithRetries(ctx, next.url, "cus_42", key, body, t.Logf)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, a.status, a.body)
			require.Equal(t, tc.replayed, a.header.Get("Idempotent-Replayed") == "true")
			require.Equal(t, 1, countOrders(t, pool, schema), "one order, whatever failed when")

			again, err := sendOrder(ctx, next.url, "cus_42", key, body)
			require.NoError(t, err)
			require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
			require.Equal(t, a.body, again.body)
			require.Equal(t, a.header.Get("Location"), again.header.Get("Location"))
			require.Equal(t, 1, countOrders(t, pool, schema))

			var scope string
			require.NoError(t, pool.QueryRow(ctx, "SELECT idem_scope FROM "+pgx.Identifier{schema, "orders"}.Sanitize()).Scan(&scope))
			require.Equal(t, httpidem.Scope("cus_42", key), scope)
			var attempts int
			require.NoError(t, pool.QueryRow(ctx, "SELECT attempts FROM "+pgx.Identifier{schema, "idem_records"}.Sanitize()).Scan(&attempts))
			wantAttempts := 2 // the dead server's claim, then the takeover
			if tc.replayed {
				wantAttempts = 1
			}
			require.Equal(t, wantAttempts, attempts)

			require.NoError(t, next.stop(t), "a SIGTERM shuts the server down cleanly")
		})
	}
}

// child is the service running in a process of its own: this test binary,
// started with childEnv set (see TestMain).
type child struct {
	cmd  *exec.Cmd
	url  string
	once sync.Once
	err  error
}

// startChild starts the service on schema, dying at point, and waits until
// it listens.
func startChild(t *testing.T, schema, point string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0],
		"-database-url", pgtest.URL(t), "-schema", schema, "-addr", "127.0.0.1:0", "-lease", childLease.String())
	cmd.Env = append(os.Environ(), childEnv+"="+point)
	listening := &firstLine{ch: make(chan string, 1)}
	cmd.Stdout = listening
	cmd.Stderr = &testLog{t: t, prefix: point + ": "}
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = c.wait(t)
	})
	select {
	case line := <-listening.ch:
		u, ok := strings.CutPrefix(line, "httporder listening on ")
		require.True(t, ok, "first line: %q", line)
		c.url = u
	case <-time.After(time.Minute):
		require.FailNow(t, "the server did not start")
	}
	return c
}

// wait waits for the process to end and returns how (once; later calls
// return the same).
func (c *child) wait(t *testing.T) error {
	t.Helper()
	c.once.Do(func() { c.err = c.cmd.Wait() })
	return c.err
}

// stop asks the server to shut down and returns its exit.
func (c *child) stop(t *testing.T) error {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
	return c.wait(t)
}

// firstLine hands the first line written to it to ch.
type firstLine struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sent bool
	ch   chan string
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.Write(p)
	if line, _, ok := strings.Cut(f.buf.String(), "\n"); ok && !f.sent {
		f.sent = true
		f.ch <- line
	}
	return len(p), nil
}

// testLog writes a child's log lines to the test's log.
type testLog struct {
	t      *testing.T
	prefix string
}

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Log(l.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// reply is an answer as a client saw it.
type reply struct {
	status int
	header http.Header
	body   string
}

// sendOrder sends one POST /orders.
func sendOrder(ctx context.Context, base, customer, key, body string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/orders", strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Customer", customer)
	req.Header.Set("Idempotency-Key", `"`+key+`"`) // a Structured Field String
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// postWithRetries is the client side of docs/http.md: the same key on
// every attempt; Retry-After honoured on 409 and 503; capped, jittered
// exponential backoff after a network error or another 5xx; any other
// answer is final.
func postWithRetries(ctx context.Context, base, customer, key, body string, logf func(string, ...any)) (reply, error) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		r, err := sendOrder(ctx, base, customer, key, body)
		logf("attempt %d: status %d, Retry-After %q, error %v", attempt, r.status, r.header.Get("Retry-After"), err)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() != nil:
			return reply{}, err
		case err != nil, r.status >= 500 && r.status != http.StatusServiceUnavailable:
			wait = backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, 5*time.Second)
		case r.status == http.StatusConflict || r.status == http.StatusServiceUnavailable:
			secs, perr := strconv.Atoi(r.header.Get("Retry-After"))
			if perr != nil || secs < 0 {
				secs = 1
			}
			wait = time.Duration(secs) * time.Second
		default:
			return r, nil
		}
		if attempt == 20 {
			return r, errors.Join(errors.New("gave up after 20 attempts"), err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return reply{}, ctx.Err()
		}
	}
}

func countOrders(t *testing.T, pool *pgxpool.Pool, schema string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(testContext(t), "SELECT count(*) FROM "+pgx.Identifier{schema, "orders"}.Sanitize()).Scan(&n)
	require.NoError(t, err)
	return n
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
