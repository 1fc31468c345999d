package pgstore

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/idemstore/idemstore/internal/backoff"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Reconnect delays of the listener after its connection failed.
const (
	listenerMinBackoff = 100 * time.Millisecond
	listenerMaxBackoff = 5 * time.Second
	listenerCloseWait  = time.Second
	// listenerConnectTimeout bounds a connection attempt of the listener
	// when the pool's settings set none (connect_timeout): an attempt made
	// while the server restarts can be accepted and never answered (a
	// container's published port), and without a bound the listener
	// waited on it for good, its waiters never woken by notifications
	// again.
	listenerConnectTimeout = 10 * time.Second
)

// listener holds the one connection of a Store that LISTENs on the store's
// channel, and hands every notification to the waiters. It is started by
// the first Wait (a store that never waits never opens it), reconnects with
// backoff when its connection fails, and is stopped by Store.Close.
//
// The connection is opened with the pool's connection settings (and its
// BeforeConnect hook, which may supply credentials) but outside the pool: it
// is held for the store's life and must not take a slot that queries need.
type listener struct {
	pool    *pgxpool.Pool
	channel string
	log     *slog.Logger
	waiters *waiters

	// connectTimeout is listenerConnectTimeout but in tests.
	connectTimeout time.Duration

	mu      sync.Mutex
	started bool               // guarded by mu
	stopped bool               // guarded by mu
	ready   chan struct{}      // guarded by mu; closed while the connection listens
	cancel  context.CancelFunc // guarded by mu; stops run
	done    chan struct{}      // guarded by mu; closed when run returned
}

func newListener(pool *pgxpool.Pool, channel string, log *slog.Logger, ws *waiters) *listener {
	return &listener{pool: pool, channel: channel, log: log, waiters: ws, ready: make(chan struct{}),
		connectTimeout: listenerConnectTimeout}
}

// start runs the listener unless it runs already or was stopped, and returns
// a channel that is closed while it listens.
func (l *listener) start() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started && !l.stopped {
		l.started = true
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done = cancel, make(chan struct{})
		go l.run(ctx)
	}
	return l.ready
}

// stop ends the listener and waits until its goroutine and connection are
// gone. Safe to call more than once, and before start.
func (l *listener) stop() {
	l.mu.Lock()
	l.stopped = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (l *listener) setReady(listening bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if listening {
		close(l.ready)
	} else {
		l.ready = make(chan struct{})
	}
}

func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	delay := backoff.New(listenerMinBackoff, listenerMaxBackoff)
	listenedBefore := false
	for {
		err := l.session(ctx, func() {
			// Notifications sent while no connection listened are lost:
			// every waiter looks at its record again.
			if listenedBefore {
				l.waiters.wakeAll()
			}
			listenedBefore = true
			delay.Reset()
		})
		if ctx.Err() != nil {
			return
		}
		d := delay.Next()
		l.log.LogAttrs(ctx, slog.LevelWarn, "idemstore: listener connection failed, reconnecting",
			slog.String("channel", l.channel), slog.Duration("backoff", d), slog.Any("error", err))
		if !backoff.Sleep(ctx, d) {
			return
		}
	}
}

// session connects, listens, calls listening once the LISTEN took effect,
// and routes notifications until the connection fails or ctx ends.
func (l *listener) session(ctx context.Context, listening func()) error {
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), listenerCloseWait)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(l.channel)); err != nil {
		return err
	}
	l.setReady(true)
	defer l.setReady(false)
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.waiters.notify(n.Payload)
	}
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := l.pool.Config() // a copy: safe to change
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = l.connectTimeout
	}
	if cfg.BeforeConnect != nil {
		if err := cfg.BeforeConnect(ctx, cfg.ConnConfig); err != nil {
			return nil, err
		}
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}
