package mcptools_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/mcptools"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// sendStructured is send's structured content for its first run to "ada"
// as the server sends it: keys unsorted, an integer beyond float64, 1.50.
const sendStructured = `{"zone":"last key first","run":1,"to":"ada","big":` + mcptest.BigNumber + `,"price":1.50}`

// idempotent returns an idempotent executor over a Caller on session, on a
// fresh in-memory store, bound to scope.
func idempotent(t *testing.T, session *mcp.ClientSession, scope string) (*executor.Scoped, *memstore.Store) {
	t.Helper()
	caller, err := mcptools.NewCaller(session)
	require.NoError(t, err)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	ex, err := executor.New(caller, st, nil)
	require.NoError(t, err)
	return ex.ForScope(scope), st
}

func TestCallerKeepsStructuredContentByteForByte(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	caller, err := mcptools.NewCaller(srv.session)
	require.NoError(t, err)

	res, err := caller.Execute(testContext(t), executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada"}`)})
	require.NoError(t, err)
	require.False(t, res.Failed)
	require.JSONEq(t, `{"content":[{"type":"text","text":"sent to ada (run 1)"}],"structuredContent":`+sendStructured+`}`, string(res.Output))
	require.Contains(t, string(res.Output), `"structuredContent":`+sendStructured, "the server's bytes, not a re-encoding")

	decoded, err := mcptools.DecodeResult(res.Output)
	require.NoError(t, err)
	require.Equal(t, json.RawMessage(sendStructured), decoded.StructuredContent)
	require.Equal(t, "sent to ada (run 1)", decoded.Content[0].(*mcp.TextContent).Text)
}

func TestIdempotentCallerReplaysTheStoredResultAndTheToolRunsOnce(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	ex, _ := idempotent(t, srv.session, "run-1")
	call := executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada"}`)}

	first, err := ex.Execute(testContext(t), call)
	require.NoError(t, err)
	again, err := ex.Execute(testContext(t), executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{ "to" : "ada" }`)})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Output, again.Output, "a replay is the stored bytes")
	require.Equal(t, 1, srv.runs(t, mcptest.ToolSend))
}

func TestCallerSendsTheDownstreamKeyAndMetaButNotProtocolKeys(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	ex, st := idempotent(t, srv.session, "run-1")
	ctx := mcptools.WithCallParams(testContext(t), mcptools.CallParams{Meta: mcp.Meta{
		"trace/id":                           "t-1",
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "someone else"},
	}})
	call := executor.Call{Tool: mcptest.ToolMeta, Args: json.RawMessage(`{}`), InvocationID: "op-7"}

	res, err := ex.Execute(ctx, call)
	require.NoError(t, err)
	seen := seenMeta(t, res.Output)
	ent, err := executor.EntryOf(call, st.Limits())
	require.NoError(t, err)
	require.Equal(t, "t-1", seen["trace/id"])
	require.Equal(t, keyhash.DownstreamKey("run-1", ent.Key), seen[mcptools.MetaDownstreamKey])
	require.NotContains(t, seen, mcptools.MetaIdempotencyKey, "the invocation id stays local")
	info, _ := seen["io.modelcontextprotocol/clientInfo"].(map[string]any)
	require.NotEqual(t, "someone else", info["name"], "the SDK's own protocol keys, never the caller's")
}

// seenMeta returns the _meta the meta tool says it received.
func seenMeta(t *testing.T, output []byte) map[string]any {
	t.Helper()
	res, err := mcptools.DecodeResult(output)
	require.NoError(t, err)
	var seen map[string]any
	require.NoError(t, json.Unmarshal(res.StructuredContent.(json.RawMessage), &seen))
	return seen
}

func TestToolErrorIsAFailedResultAndRunsAgain(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	ex, _ := idempotent(t, srv.session, "run-1")
	for range 2 {
		res, err := ex.Execute(testContext(t), executor.Call{Tool: mcptest.ToolFail})
		require.NoError(t, err)
		require.True(t, res.Failed)
		require.False(t, res.Replayed)
		decoded, err := mcptools.DecodeResult(res.Output)
		require.NoError(t, err)
		require.True(t, decoded.IsError)
	}
	require.Equal(t, 2, srv.runs(t, mcptest.ToolFail), "a tool error is not stored")
}

func TestResultThatNeedsInputIsNotStored(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil) // multi-round-trip off: the input request reaches the caller
	ex, st := idempotent(t, srv.session, "run-1")
	call := executor.Call{Tool: mcptest.ToolAsk, Args: json.RawMessage(`{"action":"delete"}`)}
	for range 2 {
		_, err := ex.Execute(testContext(t), call)
		var needs *mcptools.NeedsInputError
		require.ErrorAs(t, err, &needs)
		require.ErrorIs(t, err, mcptools.ErrNeedsInput)
		require.True(t, needs.Result.NeedsInput())
		require.Contains(t, needs.Result.InputRequests, mcptest.ConfirmRequest)
	}
	ent, err := executor.EntryOf(call, st.Limits())
	require.NoError(t, err)
	_, err = st.Get(testContext(t), "run-1", ent.Key)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Zero(t, srv.runs(t, mcptest.ToolAsk))
}

func TestServerErrorIsAnOrdinaryFailure(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	caller, err := mcptools.NewCaller(srv.session)
	require.NoError(t, err)
	_, err = caller.Execute(testContext(t), executor.Call{Tool: "no_such_tool"})
	var wire *jsonrpc.Error
	require.ErrorAs(t, err, &wire)
	require.NotErrorIs(t, err, executor.ErrOutcomeUnknown, "the server answered: nothing ran")
	require.True(t, executor.Retryable(err))
}

func TestCallAfterTheCallerGaveUpIsNotSent(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	caller, err := mcptools.NewCaller(srv.session)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(testContext(t))
	cancel()
	_, err = caller.Execute(ctx, executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(`{"to":"ada"}`)})
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, executor.ErrOutcomeUnknown)
	require.Zero(t, srv.runs(t, mcptest.ToolSend))
}

// A call whose context was cancelled with a cause (context.WithCancelCause)
// before it was sent fails with an error that matches context.Canceled, as
// every ended context's error does, and the cause too: it matched the cause
// alone, so a caller asking errors.Is(err, context.Canceled) did not see its
// own cancellation.
func TestCallCancelledWithACauseMatchesContextCanceledAndTheCause(t *testing.T) {
	t.Parallel()
	var calls int
	caller, err := mcptools.NewCaller(rawServer(t, `[{"name":"a","inputSchema":{"type":"object"}}]`, `{"content":[]}`, &calls))
	require.NoError(t, err)
	cause := errors.New("the user left")
	ctx, cancel := context.WithCancelCause(testContext(t))
	cancel(cause)
	_, err = caller.Execute(ctx, executor.Call{Tool: "a"})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, cause)
	require.NotErrorIs(t, err, executor.ErrOutcomeUnknown)
	require.Equal(t, contract.ClassRetry, contract.ClassOf(err))
	require.Zero(t, calls, "nothing was sent")
}

func TestServerDyingMidCallLeavesTheOutcomeUnknownAndTheCallIsNotRunAgain(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	caller, err := mcptools.NewCaller(srv.session)
	require.NoError(t, err)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	ex, err := executor.New(caller, st, &executor.Config{MaxWait: 50 * time.Millisecond})
	require.NoError(t, err)
	call := executor.Call{Tool: mcptest.ToolCrash, Args: json.RawMessage(`{}`)}

	_, err = ex.ForScope("run-1").Execute(testContext(t), call)
	require.ErrorIs(t, err, executor.ErrOutcomeUnknown, "the server ran the tool, its answer was lost")
	require.Equal(t, contract.ClassOutcomeUnknown, executor.ClassOf(err))
	require.Equal(t, 1, srv.runs(t, mcptest.ToolCrash))

	_, err = ex.ForScope("run-1").Execute(testContext(t), call)
	require.ErrorIs(t, err, store.ErrInFlight, "the claim is kept until its lease ends: no second run at once")
}

func TestNilArgumentsAreRefusedWithTypedErrors(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, err := mcptools.NewCaller(nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
	_, err = mcptools.Connect(ctx, nil, &mcp.StdioTransport{}, nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
	_, err = mcptools.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "x"}, nil), nil, nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
	_, err = mcptools.ListTools(ctx, nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
	_, err = mcptools.Register(ctx, nil, nil, nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
	_, err = mcptools.NewProxy(ctx, nil, nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = mcptools.ListTools(nil, nil)
	require.ErrorIs(t, err, store.ErrInvalidInput)
}

func TestWhiteSpaceArgumentsRunAsAbsentOnesAndLeaveNoRefusedClaim(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	ex, st := idempotent(t, srv.session, "run-1")
	// keyhash reads all-white-space arguments as absent: the key of {} and
	// null. The Caller must run them too, not refuse the call it was
	// handed under a claim.
	blank := executor.Call{Tool: mcptest.ToolMeta, Args: json.RawMessage(" \t\r\n")}

	first, err := ex.Execute(testContext(t), blank)
	require.NoError(t, err, "not refused as invalid JSON")
	require.False(t, first.Failed)
	require.False(t, first.Replayed)

	again, err := ex.Execute(testContext(t), executor.Call{Tool: mcptest.ToolMeta, Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.True(t, again.Replayed, "{} is the call white space was")
	require.Equal(t, first.Output, again.Output)

	ent, err := executor.EntryOf(blank, st.Limits())
	require.NoError(t, err)
	rec, err := st.Get(testContext(t), "run-1", ent.Key)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Status)
	require.Equal(t, 1, rec.Attempts, "one claim, completed")
	require.Empty(t, rec.LastError, "no claim was released")
}

// inMemoryServer serves the tool "a" over an in-memory transport and
// returns a session on it connected with Connect, the number of runs of
// "a", and breakServer, which closes the server's side of the connection
// under it (a server that died). While block is set, a run of "a" signals
// started and waits for its context to end.
type inMemoryServer struct {
	session *mcp.ClientSession
	started chan struct{}

	mu   sync.Mutex
	runs int                // guarded by mu
	conn mcp.Connection     // the server's side; guarded by mu
	ss   *mcp.ServerSession // guarded by mu
}

func startInMemoryServer(t *testing.T, block bool) *inMemoryServer {
	t.Helper()
	ctx := testContext(t)
	srv := &inMemoryServer{started: make(chan struct{}, 1)}
	s := mcp.NewServer(&mcp.Implementation{Name: "in-memory", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			srv.mu.Lock()
			srv.runs++
			srv.mu.Unlock()
			if block {
				srv.started <- struct{}{}
				<-ctx.Done()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, &keptConnTransport{inner: st, srv: srv}, nil)
	require.NoError(t, err)
	srv.mu.Lock()
	srv.ss = ss
	srv.mu.Unlock()
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcptools.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "mcptools-test", Version: "1"}, nil), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	srv.session = cs
	return srv
}

// keptConnTransport hands on inner's connection and keeps it, so that a
// test can close it under the server.
type keptConnTransport struct {
	inner mcp.Transport
	srv   *inMemoryServer
}

func (k *keptConnTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := k.inner.Connect(ctx)
	if err == nil {
		k.srv.mu.Lock()
		k.srv.conn = c
		k.srv.mu.Unlock()
	}
	return c, err
}

func (s *inMemoryServer) runCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}

// A call on a session that is already closed (by its client, or because
// the server went away before the call) never leaves the process: the SDK
// refuses it with mcp.ErrConnectionClosed before writing the request. It
// is an ordinary failure, so the idempotent executor releases its claim
// and a retry on a live session runs at once. It was reported as an
// unknown outcome, and the claim blocked every retry until its lease ended.
func TestCallOnAClosedSessionIsAnOrdinaryFailureAndReleasesTheClaim(t *testing.T) {
	t.Parallel()
	for name, closeSession := range map[string]func(*inMemoryServer){
		"closed by the client": func(s *inMemoryServer) { _ = s.session.Close() },
		"closed by the server": func(s *inMemoryServer) {
			s.mu.Lock()
			ss := s.ss
			s.mu.Unlock()
			_ = ss.Close()
			_ = s.session.Wait() // the client has seen the end
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, err := memstore.New(nil)
			require.NoError(t, err)
			cfg := &executor.Config{MaxWait: 50 * time.Millisecond, Lease: time.Minute}
			closed := startInMemoryServer(t, false)
			closeSession(closed)
			caller, err := mcptools.NewCaller(closed.session)
			require.NoError(t, err)
			ex, err := executor.New(caller, st, cfg)
			require.NoError(t, err)
			call := executor.Call{Tool: "a", Args: json.RawMessage(`{"n":1}`)}

			_, err = ex.ForScope("run-1").Execute(testContext(t), call)
			require.ErrorIs(t, err, mcp.ErrConnectionClosed)
			require.NotErrorIs(t, err, executor.ErrOutcomeUnknown, "nothing was sent")
			require.Equal(t, contract.ClassRetry, executor.ClassOf(err))
			require.Zero(t, closed.runCount())

			live := startInMemoryServer(t, false)
			liveCaller, err := mcptools.NewCaller(live.session)
			require.NoError(t, err)
			liveEx, err := executor.New(liveCaller, st, cfg)
			require.NoError(t, err)
			res, err := liveEx.ForScope("run-1").Execute(testContext(t), call)
			require.NoError(t, err, "the claim was released: the retry runs at once, not after the lease")
			require.False(t, res.Replayed)
			require.Equal(t, 1, live.runCount())
		})
	}
}

// A connection lost while the call was out may have come after the server
// ran the tool: the outcome stays unknown and the claim is kept, so the
// call is not run again at once (the closed-session case above must not
// swallow this one).
func TestConnectionLostMidCallStaysUnknownAndKeepsTheClaim(t *testing.T) {
	t.Parallel()
	srv := startInMemoryServer(t, true)
	caller, err := mcptools.NewCaller(srv.session)
	require.NoError(t, err)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	ex, err := executor.New(caller, st, &executor.Config{MaxWait: 50 * time.Millisecond, Lease: time.Minute})
	require.NoError(t, err)
	go func() {
		<-srv.started
		srv.mu.Lock()
		conn := srv.conn
		srv.mu.Unlock()
		_ = conn.Close()
	}()
	call := executor.Call{Tool: "a", Args: json.RawMessage(`{"n":1}`)}

	_, err = ex.ForScope("run-1").Execute(testContext(t), call)
	require.ErrorIs(t, err, executor.ErrOutcomeUnknown, "the server ran the tool, its answer was lost")
	require.NotErrorIs(t, err, mcp.ErrConnectionClosed)
	require.Equal(t, 1, srv.runCount())

	_, err = ex.ForScope("run-1").Execute(testContext(t), call)
	require.ErrorIs(t, err, store.ErrInFlight, "the claim is kept until its lease ends")
}
