package mcptools_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/mcptools"
	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
)

// rawServer is an MCP server written by hand, for answers the SDK's server
// would never give: tools/list answers with the JSON array tools, and
// tools/call with the JSON result call. It counts the tools/call requests
// it gets in *calls.
func rawServer(t *testing.T, tools, call string, calls *int) *mcp.ClientSession {
	t.Helper()
	return rawServerAnswering(t, `{"tools":{}}`, func(method string) string {
		switch method {
		case "tools/list":
			return `{"tools":` + tools + `}`
		case "tools/call":
			*calls++
			return call
		}
		return `{}`
	})
}

// rawServerAnswering is an MCP server written by hand that declares the
// capabilities caps (a JSON object) and answers every request but
// initialize with the JSON result answer gives for its method.
func rawServerAnswering(t *testing.T, caps string, answer func(method string) string) *mcp.ClientSession {
	t.Helper()
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(serverIn)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"params"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
				continue // a notification
			}
			var res string
			if m.Method == "initialize" {
				res = `{"protocolVersion":"` + m.Params.ProtocolVersion + `","capabilities":` + caps + `,"serverInfo":{"name":"raw","version":"1"}}`
			} else {
				res = answer(m.Method)
			}
			if _, err := serverOut.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + res + "}\n")); err != nil {
				return
			}
		}
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptools-test", Version: "1"}, nil)
	cs, err := mcptools.Connect(testContext(t), client, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = serverOut.Close()
		_ = serverIn.Close()
		<-done
	})
	return cs
}

// An upstream that lists a null prompt, resource or resource template
// (the SDK hands it on as a nil pointer) is refused by NewProxy with an
// error naming the list and the entry, as a null tool is: it crashed the
// proxy as it started (cmd/mcpproxy with it).
func TestNewProxyRefusesAnUpstreamListingANullPromptOrResource(t *testing.T) {
	t.Parallel()
	for list, answer := range map[string]string{
		"prompts/list":             `{"prompts":[{"name":"p"},null]}`,
		"resources/list":           `{"resources":[null]}`,
		"resources/templates/list": `{"resourceTemplates":[null]}`,
	} {
		t.Run(list, func(t *testing.T) {
			t.Parallel()
			cs := rawServerAnswering(t, `{"tools":{},"prompts":{},"resources":{}}`, func(method string) string {
				switch method {
				case list:
					return answer
				case "tools/list":
					return `{"tools":[]}`
				}
				return `{}`
			})
			st, err := memstore.New(nil)
			require.NoError(t, err)
			p, err := mcptools.NewProxy(testContext(t), cs, &mcptools.ProxyConfig{Store: st})
			require.Nil(t, p)
			require.ErrorContains(t, err, list+": ")
			require.ErrorContains(t, err, "is null")
		})
	}
}

func TestRegisterRefusesAToolWithoutANameBeforeRegisteringAny(t *testing.T) {
	t.Parallel()
	var calls int
	cs := rawServer(t, `[{"name":"a","inputSchema":{"type":"object"}},{"name":"","inputSchema":{"type":"object"}}]`, `{"content":[]}`, &calls)
	reg := agent.NewRegistry()
	_, err := mcptools.Register(testContext(t), reg, cs, nil)
	var te *agent.ToolError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, agent.ErrInvalidToolSpec)
	require.Empty(t, reg.Specs(), `"a" was registered before the empty name was refused`)
}

func TestCallerRefusesInvalidArgumentsWithoutSendingThem(t *testing.T) {
	t.Parallel()
	var calls int
	cs := rawServer(t, `[{"name":"a","inputSchema":{"type":"object"}}]`, `{"content":[]}`, &calls)
	c, err := mcptools.NewCaller(cs)
	require.NoError(t, err)
	_, err = c.Execute(testContext(t), executor.Call{Tool: "a", Args: json.RawMessage(`{"to":`)})
	var ae *contract.ArgumentsError
	require.ErrorAs(t, err, &ae, "not a call whose outcome is unknown: nothing was sent")
	require.NotErrorIs(t, err, executor.ErrOutcomeUnknown)
	require.Zero(t, calls)

	_, err = (&mcptools.Caller{}).Execute(testContext(t), executor.Call{Tool: "a"})
	var ie *contract.InputError
	require.ErrorAs(t, err, &ie, "a Caller not made by NewCaller")

	res, err := c.Execute(testContext(t), executor.Call{Tool: "a", Args: json.RawMessage(`{"to":"ada"}`)})
	require.NoError(t, err, "a good call still works")
	require.False(t, res.Failed)
	require.Equal(t, 1, calls)
}

// Arguments with invalid UTF-8 in a string are not JSON (JSON is UTF-8),
// though encoding/json takes them: the Caller refuses them as keyhash does,
// with the offset of the bad byte, and sends nothing. They were sent, and a
// server's decoder turned the byte into U+FFFD, running the tool on other
// arguments than the caller's.
func TestCallerRefusesArgumentsWithInvalidUTF8WithoutSendingThem(t *testing.T) {
	t.Parallel()
	var calls int
	c, err := mcptools.NewCaller(rawServer(t, `[{"name":"a","inputSchema":{"type":"object"}}]`, `{"content":[]}`, &calls))
	require.NoError(t, err)
	_, err = c.Execute(testContext(t), executor.Call{Tool: "a", Args: json.RawMessage("{\"to\":\"ad\xffa\"}")})
	var ae *contract.ArgumentsError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 9, ae.Offset)
	require.Contains(t, ae.Problem, "UTF-8")
	require.Equal(t, contract.ClassBadCall, contract.ClassOf(err))
	require.Zero(t, calls, "nothing was sent")

	_, err = c.Execute(testContext(t), executor.Call{Tool: "a", Args: json.RawMessage(`{"to":"adé"}`)})
	require.NoError(t, err, "valid UTF-8 is sent")
	require.Equal(t, 1, calls)
}

func TestCallerSendsWhiteSpaceArgumentsAsAbsentNotAsInvalidJSON(t *testing.T) {
	t.Parallel()
	var calls int
	cs := rawServer(t, `[{"name":"a","inputSchema":{"type":"object"}}]`, `{"content":[]}`, &calls)
	c, err := mcptools.NewCaller(cs)
	require.NoError(t, err)
	for _, args := range []string{" ", " \n", "\t\r\n "} {
		res, err := c.Execute(testContext(t), executor.Call{Tool: "a", Args: json.RawMessage(args)})
		require.NoError(t, err, "%q is absent arguments, as keyhash reads it", args)
		require.False(t, res.Failed)
	}
	require.Equal(t, 3, calls)

	_, err = c.Execute(testContext(t), executor.Call{Tool: "a", Args: json.RawMessage(" \n{\"to\":")})
	var ae *contract.ArgumentsError
	require.ErrorAs(t, err, &ae, "white space around invalid JSON is still refused")
	require.Equal(t, len(" \n{\"to\":"), ae.Offset, "the offset counts from the arguments as given")
	require.Equal(t, 3, calls)
}

func TestErrorsQuoteAHugeToolNameAsABoundedPrefix(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("t", 1<<20)
	require.Less(t, len((&mcptools.NeedsInputError{Tool: huge}).Error()), 1024, "and a nil Result does not panic")

	var calls int
	c, err := mcptools.NewCaller(rawServer(t, `[]`, `{"content":[]}`, &calls))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(testContext(t))
	cancel()
	_, err = c.Execute(ctx, executor.Call{Tool: huge})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, len(err.Error()), 1024)
	require.Zero(t, calls)
}

func TestRegisterRefusesAToolNameTheRegistryWouldRefuseBeforeRegisteringAny(t *testing.T) {
	t.Parallel()
	for name, tool := range map[string]string{
		"newline":        `a\nb`,
		"NUL":            `a\u0000b`,
		"over the limit": strings.Repeat("t", agent.MaxToolNameBytes+1),
	} {
		var calls int
		cs := rawServer(t, `[{"name":"a","inputSchema":{"type":"object"}},{"name":"`+tool+`","inputSchema":{"type":"object"}}]`, `{"content":[]}`, &calls)
		reg := agent.NewRegistry()
		_, err := mcptools.Register(testContext(t), reg, cs, nil)
		var te *agent.ToolError
		require.ErrorAs(t, err, &te, name)
		require.ErrorIs(t, err, agent.ErrInvalidToolSpec, name)
		require.Empty(t, reg.Specs(), `%s: "a" was registered before the bad name was refused`, name)
	}

	var calls int
	cs := rawServer(t, `[{"name":"a","inputSchema":{"type":"object"}}]`, `{"content":[]}`, &calls)
	reg := agent.NewRegistry()
	_, err := mcptools.Register(testContext(t), reg, cs, &mcptools.RegisterOptions{Prefix: "mail\n"})
	require.ErrorIs(t, err, agent.ErrInvalidToolSpec, "the prefix is part of the name")
	require.Empty(t, reg.Specs())
}

func TestANullResultIsNotStoredAsAnEmptyOne(t *testing.T) {
	t.Parallel()
	// The server may have run the tool: its outcome is unknown, and the
	// claim is kept, rather than "{}" stored as what the call returned.
	var calls int
	c, err := mcptools.NewCaller(rawServer(t, `[{"name":"a","inputSchema":{"type":"object"}}]`, `null`, &calls))
	require.NoError(t, err)
	res, err := c.Execute(testContext(t), executor.Call{Tool: "a", Args: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, executor.ErrOutcomeUnknown)
	require.ErrorContains(t, err, "the result is null")
	require.Empty(t, res.Output)
	require.Equal(t, 1, calls)
}

func TestConnectRefusesTransportsTheSDKWouldCrashOn(t *testing.T) {
	t.Parallel()
	// Each panicked, the IOTransport without a Reader in the SDK's reading
	// goroutine, which no caller can recover: it ended the process.
	for name, tr := range map[string]mcp.Transport{
		"nil":                        nil,
		"a nil *CommandTransport":    (*mcp.CommandTransport)(nil),
		"a nil *IOTransport":         (*mcp.IOTransport)(nil),
		"a nil *StdioTransport":      (*mcp.StdioTransport)(nil),
		"a nil *InMemoryTransport":   (*mcp.InMemoryTransport)(nil),
		"a nil *StreamableClient…":   (*mcp.StreamableClientTransport)(nil),
		"a CommandTransport, no cmd": &mcp.CommandTransport{},
		"an IOTransport, no reader":  &mcp.IOTransport{Writer: nopWriteCloser{}},
		"an IOTransport, no writer":  &mcp.IOTransport{Reader: io.NopCloser(strings.NewReader(""))},
		"a zero InMemoryTransport":   &mcp.InMemoryTransport{},
	} {
		client := mcp.NewClient(&mcp.Implementation{Name: "mcptools-test", Version: "1"}, nil)
		_, err := mcptools.Connect(testContext(t), client, tr, nil)
		var ie *contract.InputError
		require.ErrorAs(t, err, &ie, name)
		require.Equal(t, "transport", ie.Field, name)
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// MCP arguments are an object, as keyhash reads them: an array, string,
// number or boolean was sent, and a server whose handler reads its
// arguments raw ran the tool on it. null has the key of absent arguments
// and is now sent as they are (none), not as a null a server may refuse.
func TestCallerRefusesArgumentsThatAreNotAnObjectAndSendsNullAsAbsent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	s := mcp.NewServer(&mcp.Implementation{Name: "raw-args", Version: "1"}, nil)
	var (
		mu  sync.Mutex
		got []string
	)
	s.AddTool(&mcp.Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			got = append(got, string(req.Params.Arguments))
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
		})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcptools.Connect(ctx, mcp.NewClient(&mcp.Implementation{Name: "mcptools-test", Version: "1"}, nil), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	c, err := mcptools.NewCaller(cs)
	require.NoError(t, err)

	for args, kind := range map[string]string{`[1]`: "an array", ` "x"`: "a string", `5`: "a number", `true`: "a boolean"} {
		_, err := c.Execute(ctx, executor.Call{Tool: "a", Args: json.RawMessage(args)})
		var ae *contract.ArgumentsError
		require.ErrorAs(t, err, &ae, args)
		require.Contains(t, ae.Problem, kind, args)
		require.Equal(t, len(args)-len(strings.TrimLeft(args, " ")), ae.Offset, args)
		require.Equal(t, contract.ClassBadCall, contract.ClassOf(err), args)
	}
	mu.Lock()
	require.Empty(t, got, "nothing was sent")
	mu.Unlock()

	for _, args := range []string{`null`, " null\n", ``} {
		res, err := c.Execute(ctx, executor.Call{Tool: "a", Args: json.RawMessage(args)})
		require.NoError(t, err, "%q", args)
		require.False(t, res.Failed)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 3)
	require.Equal(t, got[2], got[0], "null is sent as absent arguments are")
	require.Equal(t, got[2], got[1])
}

// Arguments nested deeper than a server on the MCP Go SDK reads are
// refused before they are sent: such a server does not answer them but
// closes the session, so the call came back as an unknown outcome (its
// claim kept until the lease ended, though the tool never ran) and every
// later call on the session failed. Reachable with a bare Caller, or an
// executor whose depth limit was raised above the SDK's.
func TestCallerRefusesArgumentsNestedDeeperThanTheSDKReadsAndKeepsTheSession(t *testing.T) {
	t.Parallel()
	nested := func(depth int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"a":`, depth) + `"[{"` + strings.Repeat("}", depth))
	}
	srv := startInMemoryServer(t, false)
	caller, err := mcptools.NewCaller(srv.session)
	require.NoError(t, err)

	_, err = caller.Execute(testContext(t), executor.Call{Tool: "a", Args: nested(999)})
	var ae *contract.ArgumentsError
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Problem, "nested deeper than 998 levels")
	require.Equal(t, 998*len(`{"a":`), ae.Offset, "the first bracket too deep")
	require.Equal(t, contract.ClassBadCall, contract.ClassOf(err))
	require.NotErrorIs(t, err, executor.ErrOutcomeUnknown)

	st, err := memstore.New(&memstore.Config{Limits: store.Limits{MaxDepth: 2000}})
	require.NoError(t, err)
	ex, err := executor.New(caller, st, &executor.Config{MaxWait: 50 * time.Millisecond, Lease: time.Minute})
	require.NoError(t, err)
	for range 2 {
		_, err = ex.ForScope("run-1").Execute(testContext(t), executor.Call{Tool: "a", Args: nested(1500)})
		require.ErrorAs(t, err, &ae, "refused again, not in flight: no claim was kept")
	}
	require.Zero(t, srv.runCount())

	res, err := caller.Execute(testContext(t), executor.Call{Tool: "a", Args: nested(998)})
	require.NoError(t, err, "the session is still open, and the deepest arguments the SDK reads are sent")
	require.False(t, res.Failed)
	require.Equal(t, 1, srv.runCount())
}

// An upstream whose prompts or resources lists page without end (a cursor
// repeated, or a new one on every page) is refused by NewProxy after a
// bounded number of pages, as ListTools refuses such a tools/list: the
// proxy never started, sending list requests without end.
func TestNewProxyRefusesAnUpstreamThatPagesItsListsWithoutEnd(t *testing.T) {
	t.Parallel()
	for _, list := range []string{"prompts/list", "resources/list", "resources/templates/list"} {
		for name, cursor := range map[string]func(n int) string{
			"repeated": func(int) string { return "same" },
			"endless":  func(n int) string { return fmt.Sprintf("c%d", n) },
		} {
			t.Run(list+" "+name, func(t *testing.T) {
				t.Parallel()
				entries := map[string]string{
					"prompts/list":             `"prompts":[{"name":"p"}]`,
					"resources/list":           `"resources":[{"uri":"file:///r","name":"r"}]`,
					"resources/templates/list": `"resourceTemplates":[{"uriTemplate":"file:///{x}","name":"t"}]`,
				}
				var pages int
				cs := rawServerAnswering(t, `{"tools":{},"prompts":{},"resources":{}}`, func(method string) string {
					switch method {
					case list:
						pages++
						return `{` + entries[list] + `,"nextCursor":"` + cursor(pages) + `"}`
					case "tools/list":
						return `{"tools":[]}`
					}
					return `{` + entries[method] + `}`
				})
				st, err := memstore.New(nil)
				require.NoError(t, err)
				p, err := mcptools.NewProxy(testContext(t), cs, &mcptools.ProxyConfig{Store: st})
				require.Nil(t, p)
				require.ErrorContains(t, err, list+": ")
				if name == "repeated" {
					require.ErrorContains(t, err, `repeated the cursor "same"`)
				} else {
					require.ErrorContains(t, err, "more than 1000 pages")
				}
			})
		}
	}
}

// An upstream that lists a tool's name twice is refused by NewProxy, as
// Register refuses it: the proxy served the last of them and said nothing.
func TestNewProxyRefusesAnUpstreamListingAToolTwice(t *testing.T) {
	t.Parallel()
	var calls int
	cs := rawServer(t, `[{"name":"send","description":"first","inputSchema":{"type":"object"}},{"name":"send","description":"second","inputSchema":{"type":"object"}}]`, `{"content":[]}`, &calls)
	st, err := memstore.New(nil)
	require.NoError(t, err)
	p, err := mcptools.NewProxy(testContext(t), cs, &mcptools.ProxyConfig{Store: st})
	require.Nil(t, p)
	require.ErrorContains(t, err, `the upstream lists the tool "send" twice`)
}
