package mcptools

import (
	"bytes"
	"context"
	"reflect"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
)

// Connect connects client to the MCP server behind t and returns the
// session, as client.Connect does, but keeps the raw bytes of the results
// Caller, ListTools and Register read: over a transport that hands on
// JSON-RPC messages unchanged (*mcp.CommandTransport, *mcp.StdioTransport,
// *mcp.IOTransport, *mcp.InMemoryTransport), input schemas and structured
// content are then kept byte for byte instead of being decoded and
// re-encoded by the SDK. Other transports (streamable HTTP) are connected
// as they are: the SDK's own connection must stay visible to it there.
//
// A nil client or transport, a typed nil, and one of the SDK's transports
// without what it reads from (a CommandTransport without a Command, an
// IOTransport without a Reader or Writer, a zero InMemoryTransport) are
// refused with a *contract.InputError naming "client" or "transport".
func Connect(ctx context.Context, client *mcp.Client, t mcp.Transport, opts *mcp.ClientSessionOptions) (*mcp.ClientSession, error) {
	if err := contract.CheckContext(ctx); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, &contract.InputError{Field: "client", Problem: "nil"}
	}
	if err := checkTransport(t); err != nil {
		return nil, err
	}
	switch t.(type) {
	case *mcp.CommandTransport, *mcp.StdioTransport, *mcp.IOTransport, *mcp.InMemoryTransport:
		t = &rawTransport{inner: t}
	}
	cs, err := client.Connect(ctx, t, opts)
	return cs, withoutURLSecrets(err)
}

// checkTransport refuses a transport the SDK would crash on: a typed nil
// (a nil *mcp.CommandTransport is not == nil), and the SDK's own
// transports without what they read from. An IOTransport without a Reader
// panicked in the SDK's reading goroutine, where no caller can recover,
// and took the whole process down.
func checkTransport(t mcp.Transport) error {
	if nilness.IsNil(t) {
		problem := "nil"
		if t != nil {
			problem = "a nil " + reflect.TypeOf(t).String()
		}
		return &contract.InputError{Field: "transport", Problem: problem}
	}
	problem := ""
	switch tt := t.(type) {
	case *mcp.CommandTransport:
		if tt.Command == nil {
			problem = "a CommandTransport without a Command"
		}
	case *mcp.IOTransport:
		if nilness.IsNil(tt.Reader) || nilness.IsNil(tt.Writer) {
			problem = "an IOTransport without a Reader or a Writer"
		}
	case *mcp.InMemoryTransport:
		if *tt == (mcp.InMemoryTransport{}) {
			problem = "a zero InMemoryTransport (make it with mcp.NewInMemoryTransports)"
		}
	}
	if problem != "" {
		return &contract.InputError{Field: "transport", Problem: problem}
	}
	return nil
}

// rawTransport wraps a transport whose connections it may wrap (see
// Connect): a streamable HTTP client connection must not be wrapped, since
// the SDK tells it about the session through an unexported method.
type rawTransport struct{ inner mcp.Transport }

func (t *rawTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rawConn{Connection: c, pending: make(map[jsonrpc.ID]*rawSlot)}, nil
}

// rawConn notes the raw result of every response to a request whose context
// carries a rawSlot. The context of a request reaches the connection's
// Write (the SDK passes the caller's context down), which is how a response
// finds the caller that waits for it.
type rawConn struct {
	mcp.Connection

	mu      sync.Mutex
	pending map[jsonrpc.ID]*rawSlot // requests awaiting their response; guarded by mu
}

func (c *rawConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if s, ok := ctx.Value(rawSlotKey{}).(*rawSlot); ok {
			c.mu.Lock()
			c.pending[req.ID] = s
			c.mu.Unlock()
			s.watch(c, req.ID)
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.mu.Lock()
		s := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if s != nil && resp.Error == nil {
			// A copy: the message's bytes may belong to a reused buffer.
			s.set(bytes.Clone(resp.Result))
		}
	}
	return msg, err
}

// forget drops the request id from the pending requests if s still waits
// for it there (a caller that gave up before its response came).
func (c *rawConn) forget(id jsonrpc.ID, s *rawSlot) {
	c.mu.Lock()
	if c.pending[id] == s {
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// rawSlotKey is the context key of a rawSlot.
type rawSlotKey struct{}

// rawSlot receives the raw result of the request made with its context.
// When the SDK sends the request again (a multi-round-trip retry), the last
// response wins: it answers the call the caller sees.
type rawSlot struct {
	mu      sync.Mutex
	raw     []byte       // guarded by mu
	watched []watchEntry // where the slot waits; guarded by mu
}

type watchEntry struct {
	conn *rawConn
	id   jsonrpc.ID
}

// withRawSlot returns ctx carrying a new slot. Call done on the slot once
// the request returned.
func withRawSlot(ctx context.Context) (context.Context, *rawSlot) {
	s := &rawSlot{}
	return context.WithValue(ctx, rawSlotKey{}, s), s
}

func (s *rawSlot) watch(c *rawConn, id jsonrpc.ID) {
	s.mu.Lock()
	s.watched = append(s.watched, watchEntry{c, id})
	s.mu.Unlock()
}

func (s *rawSlot) set(raw []byte) {
	s.mu.Lock()
	s.raw = raw
	s.mu.Unlock()
}

// done stops waiting and returns the raw result, nil when none was seen
// (a transport Connect did not wrap, or a failed call).
func (s *rawSlot) done() []byte {
	s.mu.Lock()
	watched, raw := s.watched, s.raw
	s.watched = nil
	s.mu.Unlock()
	for _, w := range watched {
		w.conn.forget(w.id, s)
	}
	return raw
}
