package pgstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/pgtest"
)

// faultProxy is a TCP proxy on loopback between a pool and the test
// database that cuts a connection at a chosen point of the protocol: the
// real failure a store meets when a network or a server dies, placed
// exactly where a test wants it.
//
// A fault is armed with a marker: the first client message that carries it
// (a statement's parameter: a result, a cause, a scope) triggers it. The
// proxy speaks no more PostgreSQL than it needs: it finds the marker in the
// client's bytes, and splits the server's bytes into messages (a type byte
// and a length) to see the ReadyForQuery that follows a commit.
type faultProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu    sync.Mutex
	fault *fault                // armed, not yet fired; guarded by mu
	conns map[net.Conn]struct{} // open connections, both sides; guarded by mu
	wg    sync.WaitGroup
}

type faultMode int

const (
	// dropRequest: the message carrying the marker never reaches the
	// server; the client's connection is cut. The statement did not run.
	dropRequest faultMode = iota
	// dropReply: the message reaches the server, which runs and commits
	// the statement; its whole reply, up to ReadyForQuery, is swallowed and
	// the connection cut. The statement took effect and the client never
	// heard: a lost commit acknowledgement.
	dropReply
	// holdReply: the message reaches the server, which runs and commits
	// the statement; its reply is held back and the connection left open,
	// so the client waits until its own deadline ends the statement: a
	// write that timed out after it took effect.
	holdReply
)

type fault struct {
	marker []byte
	mode   faultMode
	// before, if set, runs when the fault fires, before the connection is
	// cut (for example: another process takes the claim over meanwhile).
	before func()
	fired  chan struct{}
}

// newFaultProxy starts a proxy to the test database, stopped when t ends.
func newFaultProxy(t testing.TB) *faultProxy {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{
		t:      t,
		ln:     ln,
		target: net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))),
		conns:  make(map[net.Conn]struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

// pool returns a pool on the test database that connects through the
// proxy, closed when t ends; tune, if set, adjusts its config first.
func (p *faultProxy) pool(t testing.TB, tune func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	addr := p.ln.Addr().(*net.TCPAddr)
	return newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.Host = addr.IP.String()
		c.ConnConfig.Port = uint16(addr.Port)
		c.ConnConfig.Fallbacks = nil
		if tune != nil {
			tune(c)
		}
	})
}

// arm sets the fault that the next client message carrying marker
// triggers, and returns a channel closed once it fired.
func (p *faultProxy) arm(marker string, mode faultMode, before func()) <-chan struct{} {
	f := &fault{marker: []byte(marker), mode: mode, before: before, fired: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Nil(p.t, p.fault, "one fault at a time")
	p.fault = f
	return f.fired
}

// take returns the armed fault if data carries its marker, disarming it.
func (p *faultProxy) take(data []byte) *fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fault == nil || !bytes.Contains(data, p.fault.marker) {
		return nil
	}
	f := p.fault
	p.fault = nil
	return f
}

func (p *faultProxy) track(c net.Conn, open bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if open {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *faultProxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed by stop
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(client, true)
		p.track(server, true)
		l := &link{p: p, client: client, server: server}
		p.wg.Add(2)
		go l.clientToServer()
		go l.serverToClient()
	}
}

// link is one proxied connection.
type link struct {
	p              *faultProxy
	client, server net.Conn
	once           sync.Once
	// swallow holds the dropReply or holdReply fault whose reply the
	// server is sending.
	swallow atomic.Pointer[fault]
	held    sync.Once // holdReply's fired is closed once
}

// cut closes both sides, after running the fault's before hook, and
// reports the fault fired.
func (l *link) cut(f *fault) {
	l.once.Do(func() {
		if f != nil && f.before != nil {
			f.before()
		}
		_ = l.client.Close()
		_ = l.server.Close()
		l.p.track(l.client, false)
		l.p.track(l.server, false)
		if f != nil && f.mode != holdReply {
			close(f.fired)
		}
	})
}

// fireOnce reports a held reply's fault fired, without cutting the link.
func (l *link) fireOnce(f *fault) {
	l.held.Do(func() { close(f.fired) })
}

func (l *link) clientToServer() {
	defer l.p.wg.Done()
	defer l.cut(nil)
	buf := make([]byte, 64<<10)
	var tail []byte // the end of the previous read, so a marker split across reads is found
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			data := buf[:n]
			if f := l.p.take(append(tail, data...)); f != nil {
				if f.mode == dropRequest {
					l.cut(f)
					return
				}
				// Set before the server can answer: the reply is swallowed.
				l.swallow.Store(f)
			}
			if _, werr := l.server.Write(data); werr != nil {
				return
			}
			tail = append(tail[:0], data[max(0, n-256):]...)
		}
		if err != nil {
			return
		}
	}
}

func (l *link) serverToClient() {
	defer l.p.wg.Done()
	defer l.cut(nil)
	buf := make([]byte, 64<<10)
	var pending []byte // swallowed bytes not yet split into messages
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			if f := l.swallow.Load(); f != nil {
				pending = append(pending, buf[:n]...)
				if readyForQuery(&pending) {
					if f.mode == holdReply {
						// Committed: the client hears nothing until its
						// deadline gives up on the connection.
						l.fireOnce(f)
						continue
					}
					l.cut(f) // committed, and the client never hears of it
					return
				}
			} else if _, werr := l.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				l.p.t.Logf("proxy: read from server: %v", err)
			}
			return
		}
	}
}

// readyForQuery consumes the complete backend messages at the start of
// *data and reports whether one of them was ReadyForQuery ('Z'): the
// server finished the statement (and committed it).
func readyForQuery(data *[]byte) bool {
	for len(*data) >= 5 {
		typ := (*data)[0]
		size := int(binary.BigEndian.Uint32((*data)[1:5]))
		if len(*data) < 1+size {
			return false
		}
		*data = (*data)[1+size:]
		if typ == 'Z' {
			return true
		}
	}
	return false
}

// logBuffer collects a store's log lines for tests that check which path
// an operation took.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFired fails t unless the fault fired before ctx ended.
func waitFired(ctx context.Context, t *testing.T, fired <-chan struct{}) {
	t.Helper()
	select {
	case <-fired:
	case <-ctx.Done():
		t.Fatal("the fault never fired: the marker was not sent")
	}
}
