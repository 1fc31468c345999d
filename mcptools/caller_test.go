package mcptools_test

import (
	"context"
	"encoding/json"
	"errors"
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
