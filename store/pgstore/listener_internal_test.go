package pgstore

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// A connection attempt that the server accepts and never answers (a
// container's published port while the server restarts) is given up after
// the listener's connect timeout, and the listener tries again: it waited
// on such an attempt for good, and its waiters were never woken again.
func TestListenerGivesUpAConnectNeverAnsweredAndTriesAgain(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan struct{}, 16)
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		_ = silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	cfg, err := pgxpool.ParseConfig("postgres://u@" + silent.Addr().String() + "/db?sslmode=disable")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg) // connects lazily: nothing yet
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var ws waiters
	ws.init()
	l := newListener(pool, "idemstore", slog.New(slog.NewTextHandler(io.Discard, nil)), &ws)
	l.connectTimeout = 200 * time.Millisecond
	l.start()
	t.Cleanup(l.stop)
	for i := range 2 {
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection attempt %d never came: the listener waits on the first for good", i+1)
		}
	}
}
