package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/internal/jsonkind"
)

// Caller runs tool calls on an MCP server: an executor.Executor whose
// Execute sends tools/call over one client session. Wrap it in an
// executor.Idempotent (or register it through Register, and give the
// registry to the runtime with a store) to make the calls idempotent.
//
// Execute's Output is the result as JSON (see the package doc, and
// DecodeResult to turn it back into a result). A Caller is safe for
// concurrent use, as the session is.
type Caller struct {
	session *mcp.ClientSession
}

// NewCaller returns a Caller on session. Connect the session with Connect
// to keep structured content byte for byte.
func NewCaller(session *mcp.ClientSession) (*Caller, error) {
	if session == nil {
		return nil, &contract.InputError{Field: "session", Problem: "nil"}
	}
	return &Caller{session: session}, nil
}

// Execute calls the server's tool call.Tool with call.Args. Arguments
// that are not a JSON object (invalid JSON, invalid UTF-8 in a string, an
// array, a string, a number, a boolean), or are nested deeper than a
// server on the MCP Go SDK reads (998 levels), are refused with a
// *contract.ArgumentsError, and nothing is sent; null and all-white-space
// arguments are absent ones (the key of {}), and none are sent. The request's
// _meta carries the call's downstream key (MetaDownstreamKey) inside an
// idempotent call, and what WithCallParams put in ctx; the invocation id and
// the provider call id stay local.
//
// A result with isError gives a Result with Failed set; a result that needs
// more input gives a *NeedsInputError (not stored by an idempotent executor,
// as every error); a JSON-RPC error from the server is returned wrapped, and
// so is a call on a closed session (matching mcp.ErrConnectionClosed) or
// over HTTP to a server that could not be reached (a failed dial or name
// lookup): the request was never sent. Any other error (a connection broken
// while the call was out, an HTTP gateway's 502 or 504 in place of the
// answer, ctx done meanwhile) wraps executor.ErrOutcomeUnknown, since the
// server may have run the tool.
func (c *Caller) Execute(ctx context.Context, call executor.Call) (executor.Result, error) {
	return c.call(ctx, call.Tool, call)
}

// call is Execute with the server's name of the tool, which differs from
// call.Tool when the registry knows the tool under a prefix.
func (c *Caller) call(ctx context.Context, name string, call executor.Call) (executor.Result, error) {
	if err := contract.CheckContext(ctx); err != nil {
		return executor.Result{}, err
	}
	if c == nil || c.session == nil {
		return executor.Result{}, &contract.InputError{Field: "caller", Problem: "no session (make a Caller with NewCaller)"}
	}
	// All-white-space arguments are absent arguments, as keyhash reads
	// them (the key of {} and null): refusing them here would refuse a
	// call whose key an idempotent executor has already claimed. They run
	// as absent ones do, with no arguments sent.
	args := bytes.Trim(call.Args, " \t\r\n")
	if len(args) > 0 {
		// The SDK fails to marshal invalid JSON before sending, with an
		// error that would read as a call whose outcome is unknown: nothing
		// was sent, and the arguments are what is wrong.
		var v json.RawMessage
		if err := json.Unmarshal(call.Args, &v); err != nil { // offsets count from call.Args
			offset := -1
			var se *json.SyntaxError
			if errors.As(err, &se) {
				offset = int(se.Offset)
			}
			return executor.Result{}, &contract.ArgumentsError{Problem: "not valid JSON", Offset: offset}
		}
		// encoding/json takes invalid UTF-8 in a string (and the server's
		// decoder turns it into U+FFFD, running the tool on other
		// arguments than these); JSON is UTF-8, and keyhash refuses such
		// arguments as this error.
		if off := invalidUTF8At(call.Args); off >= 0 {
			return executor.Result{}, &contract.ArgumentsError{Problem: "invalid UTF-8 in string", Offset: off}
		}
		// MCP arguments are an object. Anything else was sent, and a
		// server whose handler reads them raw ran the tool on it; keyhash
		// refuses it as this error. null is absent arguments, as keyhash
		// reads it (the key of {}): it runs as they do, with none sent,
		// not as a null a server may refuse.
		switch args[0] {
		case '{':
		case 'n':
			args = nil
		default:
			top := len(call.Args) - len(bytes.TrimLeft(call.Args, " \t\r\n"))
			return executor.Result{}, &contract.ArgumentsError{Problem: "arguments must be a JSON object, null or absent, not " + jsonkind.Of(args[0]), Offset: top}
		}
		// A server on the MCP Go SDK cannot read a message nested deeper
		// than it allows, and ends the whole session instead of answering:
		// the call came back as an unknown outcome (its claim kept until
		// the lease ended, though nothing ran), and every later call on
		// the session failed. The executor's depth limit is far below this
		// one unless raised.
		if off := nestedDeeperThan(call.Args, maxArgsDepth); off >= 0 {
			return executor.Result{}, &contract.ArgumentsError{
				Problem: "nested deeper than " + strconv.Itoa(maxArgsDepth) + " levels, more than an MCP server on the Go SDK reads (it closes the session)", Offset: off,
			}
		}
	}
	if err := ctx.Err(); err != nil {
		// Not sent: nothing can have run. The error matches ctx.Err(), as
		// every ended context's does (contract.Interrupted), and the cause
		// the caller gave: the cause alone matched neither
		// context.Canceled nor context.DeadlineExceeded.
		if cause := context.Cause(ctx); cause != nil && cause != err {
			return executor.Result{}, fmt.Errorf("mcptools: %s: %w: %w", contract.Quote(name), err, cause)
		}
		return executor.Result{}, fmt.Errorf("mcptools: %s: %w", contract.Quote(name), err)
	}
	p := callParamsFrom(ctx)
	params := &mcp.CallToolParams{
		Name:           name,
		Meta:           forwardMeta(p.Meta, executor.DownstreamKey(ctx)),
		InputResponses: p.InputResponses,
		RequestState:   p.RequestState,
	}
	if len(args) > 0 {
		params.Arguments = json.RawMessage(call.Args)
	}
	rctx, slot := withRawSlot(ctx)
	res, err := c.session.CallTool(rctx, params)
	raw := slot.done()
	if err != nil {
		err = withoutURLSecrets(err)
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code != codeRejectedByTransport {
			return executor.Result{}, fmt.Errorf("mcptools: %s: the server refused the call: %w", contract.Quote(name), err)
		}
		if werr != nil && neverConnected(err) {
			// The HTTP transport could not reach the server at all (no
			// address, nothing listening): the request was never sent.
			return executor.Result{}, fmt.Errorf("mcptools: %s: the server could not be reached; the call was not run: %w", contract.Quote(name), err)
		}
		if errors.Is(err, mcp.ErrConnectionClosed) {
			// The SDK says so only when its connection refused to start
			// the call, closed or broken before the request was written
			// (jsonrpc2's "client is closing", or "server is closing" from
			// its write), or when the server answered with one of those
			// codes, refusing the call as it closed. Either way the tool
			// did not run: an ordinary failure, so that an idempotent
			// executor releases the claim and a retry on a live session
			// runs at once instead of waiting out the lease. A connection
			// lost once the request was out fails with the transport's
			// error instead, and stays unknown below.
			return executor.Result{}, fmt.Errorf("mcptools: %s: the session is closed; the call was not run: %w", contract.Quote(name), err)
		}
		return executor.Result{}, fmt.Errorf("mcptools: %s: %w: %w", contract.Quote(name), executor.ErrOutcomeUnknown, err)
	}
	if res.NeedsInput() {
		res.Meta = withoutReserved(res.Meta)
		return executor.Result{Failed: true}, &NeedsInputError{Tool: name, Result: res}
	}
	out, err := encodeOutcome(raw, res)
	if err != nil {
		// The tool ran, and its result cannot be kept.
		return executor.Result{}, fmt.Errorf("mcptools: %s: %w: %w", contract.Quote(name), executor.ErrOutcomeUnknown, err)
	}
	return executor.Result{Output: out, Failed: res.IsError}, nil
}

// codeRejectedByTransport is the code of the error the SDK's streamable
// HTTP transport gives for a request whose answer it did not get: its
// client's POST failed (a connection that broke after the request was
// written among them), or the answer was a 502, 503, 504 or 429 with no
// JSON-RPC error in it (a gateway's, whose server may have run the call).
// It is a *jsonrpc.Error, as a server's refusal is, but says nothing of
// whether the server ran the tool: the call's outcome is unknown, unless
// the connection was never made (neverConnected). A server's own JSON-RPC
// error, in a non-2xx answer too, is found first in the chain.
const codeRejectedByTransport = -32005

// neverConnected reports whether err holds a failure to make the
// connection (a dial or a name lookup that failed), before any request
// could be sent on it.
func neverConnected(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// maxArgsDepth is the deepest nesting of arguments a tools/call can carry
// to a server on the MCP Go SDK (v1.8.0): it refuses a message nested
// deeper than 1000 levels (internal/json's defaultMaxDepth), and the
// request puts the arguments two levels down (the message, its params).
const maxArgsDepth = 1000 - 2

// nestedDeeperThan returns the offset of the first bracket of the valid
// JSON b that opens a level deeper than max, or -1.
func nestedDeeperThan(b []byte, max int) int {
	depth, inString, escaped := 0, false, false
	for i, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > max {
				return i
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return -1
}

// invalidUTF8At returns the offset of the first byte of b that is not UTF-8,
// or -1 when b is valid UTF-8.
func invalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// CallParams are the parts of a tools/call request other than the tool and
// its arguments, for a Caller to send: what a proxy forwards from its
// client's request. None of them is part of the call's key.
type CallParams struct {
	// Meta is sent as the request's _meta, without the reserved
	// io.modelcontextprotocol/* keys (the SDK writes its own for the
	// connection to the server).
	Meta mcp.Meta
	// InputResponses and RequestState answer an earlier result that needed
	// more input (see mcp.CallToolParams).
	InputResponses mcp.InputResponseMap
	RequestState   string
}

type callParamsKey struct{}

// WithCallParams returns ctx carrying p for the tools/call a Caller sends
// with it.
func WithCallParams(ctx context.Context, p CallParams) context.Context {
	return context.WithValue(ctx, callParamsKey{}, p)
}

func callParamsFrom(ctx context.Context) CallParams {
	p, _ := ctx.Value(callParamsKey{}).(CallParams)
	return p
}
