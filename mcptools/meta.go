package mcptools

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Keys of _meta that idemstore reads or writes. They are namespaced, as the
// MCP specification asks of keys that are not the protocol's own.
const (
	// MetaScope, in a tools/call request to the proxy, names the scope (run)
	// the call belongs to, instead of the client's session: clients that
	// name the same scope share outcomes, also across sessions and proxy
	// restarts (with a durable store). A non-empty string.
	MetaScope = "idemstore/scope"
	// MetaIdempotencyKey, in a tools/call request to the proxy, is the
	// call's invocation id: the key then comes from it alone, and a retry
	// with other arguments is refused. A non-empty string.
	MetaIdempotencyKey = "idemstore/idempotency-key"
	// MetaReplayed is true in the _meta of a proxy's result that was
	// replayed from the store instead of running the tool.
	MetaReplayed = "idemstore/replayed"
	// MetaNotStored, in the _meta of a proxy's result, says why the result
	// of a tool that ran could not be stored: a retry may run it again.
	MetaNotStored = "idemstore/not-stored"
	// MetaDownstreamKey, in every tools/call a Caller sends, is the call's
	// downstream key (executor.DownstreamKey): the same on every retry,
	// takeover and restart, for the server to pass to a remote API as its
	// idempotency key. Absent outside an idempotent call.
	MetaDownstreamKey = "idemstore/downstream-key"
)

// reservedMetaPrefix starts the _meta keys the MCP SDK writes for the
// protocol itself (protocol version, client and server info and
// capabilities). They describe one connection, so they are neither
// forwarded to another server nor stored with an outcome.
const reservedMetaPrefix = "io.modelcontextprotocol/"

// isReserved reports whether a _meta key belongs to the protocol itself.
func isReserved(key string) bool { return strings.HasPrefix(key, reservedMetaPrefix) }

// forwardMeta returns a new _meta map for a request to a server: m's keys
// but the reserved ones, and the downstream key when there is one. A new
// map per call, because the SDK writes its own keys into the map it is
// given. Nil when there is nothing to send.
func forwardMeta(m mcp.Meta, downstreamKey string) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if isReserved(k) {
			continue
		}
		if out == nil {
			out = make(mcp.Meta, len(m)+1)
		}
		out[k] = v
	}
	if downstreamKey != "" {
		if out == nil {
			out = make(mcp.Meta, 1)
		}
		out[MetaDownstreamKey] = downstreamKey
	}
	return out
}

// withoutReserved returns a copy of m without the reserved keys, or nil.
func withoutReserved(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if isReserved(k) {
			continue
		}
		if out == nil {
			out = make(mcp.Meta, len(m))
		}
		out[k] = v
	}
	return out
}
