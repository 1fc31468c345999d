package main

import (
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/internal/pgtest"
	"github.com/idemstore/idemstore/mcptools"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// TestProxyKilledAfterTheCallRanRetryReplaysFromPostgreSQL is the crash
// the proxy exists for: a client sends a call, the upstream runs it and the
// proxy stores its outcome, then the proxy dies (SIGKILL) before the client
// reads the answer. The client retries against a new proxy process with
// the same scope and idempotency key, and gets the stored result: the
// upstream tool ran once.
func TestProxyKilledAfterTheCallRanRetryReplaysFromPostgreSQL(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.NewSchema(t)
	runLog := tempRunLog(t)
	args := append([]string{"-database-url", pgtest.URL(t), "-schema", schema, "--"}, upstreamCommand(runLog)...)
	meta := mcp.Meta{mcptools.MetaScope: "checkout-7", mcptools.MetaIdempotencyKey: "welcome-mail-ada"}
	const sendArgs = `{"to":"ada"}`

	// The first proxy, with a client whose connection the test can cut
	// before the answer comes.
	first := proxyCommand(t, args...)
	stdin, err := first.StdinPipe()
	require.NoError(t, err)
	stdout, err := first.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, first.Start())
	answers := &cutReader{ReadCloser: stdout}
	cs, err := mcptools.Connect(testContext(t), newClient(), &mcp.IOTransport{Reader: answers, Writer: stdin}, nil)
	require.NoError(t, err)

	answers.cutOff()
	answered := make(chan error, 1)
	go func() {
		_, err := callTool(t, cs, mcptest.ToolSend, sendArgs, meta)
		answered <- err
	}()

	// Wait until the outcome is stored, then kill the proxy.
	st, err := pgstore.New(testContext(t), pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	ent, err := executor.EntryOf(executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(sendArgs), InvocationID: "welcome-mail-ada"}, st.Limits())
	require.NoError(t, err)
	rec := awaitStored(t, st, "checkout-7", ent)
	require.NoError(t, first.Process.Kill())
	require.Error(t, <-answered, "the client never got the answer")
	_ = cs.Close() // its connection is gone already
	// Killed, or already gone: once the client reads EOF it hangs up, and a
	// proxy whose stdin closes ends by itself, so it may exit (0) before the
	// kill lands. Either way its process is over before the retry.
	_ = first.Wait()
	require.Equal(t, 1, runs(t, runLog, mcptest.ToolSend))

	// The retry, against a new proxy process.
	second := connectProcess(t, proxyCommand(t, args...))
	caller, err := mcptools.NewCaller(second)
	require.NoError(t, err)
	ctx := mcptools.WithCallParams(testContext(t), mcptools.CallParams{Meta: meta})
	res, err := caller.Execute(ctx, executor.Call{Tool: mcptest.ToolSend, Args: json.RawMessage(sendArgs)})
	require.NoError(t, err)
	require.Contains(t, string(res.Output), `"`+mcptools.MetaReplayed+`":true`)
	require.Contains(t, string(res.Output), `"structuredContent":`+sendStructured, "the stored result, byte for byte")
	stored, err := mcptools.DecodeResult(rec.Outcome.Result)
	require.NoError(t, err)
	got, err := mcptools.DecodeResult(res.Output)
	require.NoError(t, err)
	require.Equal(t, stored.Content, got.Content)
	require.Equal(t, stored.StructuredContent, got.StructuredContent)
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, 1, runs(t, runLog, mcptest.ToolSend), "the upstream tool ran once")
}

// awaitStored polls the store until the call's outcome is stored.
func awaitStored(t *testing.T, st *pgstore.Store, scope string, ent store.Entry) store.Record {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		rec, err := st.Get(testContext(t), scope, ent.Key)
		if err == nil {
			return rec
		}
		require.ErrorIs(t, err, store.ErrNotFound)
		require.True(t, time.Now().Before(deadline), "the outcome was never stored")
		time.Sleep(20 * time.Millisecond) // polling a condition in another process
	}
}

// cutReader passes reads through until cut is called; from then on what
// it reads is dropped and it reports the end of the stream, as a
// connection that broke would. It keeps a proxy's answer from a client,
// also an answer that a read already under way when cut was called brings.
type cutReader struct {
	io.ReadCloser

	mu  sync.Mutex
	cut bool // guarded by mu
}

func (c *cutReader) cutOff() {
	c.mu.Lock()
	c.cut = true
	c.mu.Unlock()
}

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return 0, io.EOF
	}
	return n, err
}
