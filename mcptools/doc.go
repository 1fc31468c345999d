// Package mcptools takes idemstore's idempotent executor to MCP (the Model
// Context Protocol), on the official Go SDK, in both directions:
//
//   - the bridge: an MCP server's tools in a runtime.Registry (Register), each
//     call a tools/call on the server (Caller), so that the agent loop replays a
//     retried run's MCP calls like local ones;
//   - the proxy: an MCP server in front of another (NewProxy, and the command
//     cmd/mcpproxy) that runs every tools/call through the idempotent executor,
//     so that any MCP client's retry is replayed instead of run twice.
//
// # What is stored
//
// A call's outcome is the tools/call result as JSON (a CallToolResult), and a
// replay hands back exactly those bytes (DecodeResult turns them back into a
// result). The stored JSON is the server's result with three changes:
// "resultType" is dropped (a stored result is always complete), the
// reserved io.modelcontextprotocol/* keys are dropped from its _meta (they
// describe one connection, not the call), and its top-level keys are sorted.
// Every value under the top level, structuredContent above all, keeps the
// server's bytes when the session came from Connect over a transport that
// hands on JSON-RPC messages unchanged (a command, stdio, in-memory): key
// order, number spelling and all. Over streamable HTTP the SDK decodes
// results before this package sees them, so structured content is
// re-encoded (sorted keys; numbers pass through float64).
//
// A result with isError set is a failed call (executor.Result.Failed): not
// stored, so the next call runs the tool again. A result that asks for more
// input (CallToolResult.NeedsInput) is never stored: Caller returns it in a
// *NeedsInputError. A JSON-RPC error from the server is an ordinary failure,
// and so is a call on a session already closed (mcp.ErrConnectionClosed),
// which the SDK never sent; any other failure of a call (the connection
// broke while it was out, the caller gave up) may have come after the
// server ran the tool, so it wraps executor.ErrOutcomeUnknown.
//
// # Keys, scopes and _meta
//
// The key of a call is its tool and canonical arguments, or the idempotency
// key a proxy client gives in _meta (MetaIdempotencyKey, the call's
// invocation id); _meta never enters the key. The proxy scopes calls per
// client session unless the client names a scope (MetaScope), marks replays
// (MetaReplayed), and every call sent to a server carries the call's
// downstream key (MetaDownstreamKey) for the server to pass on.
package mcptools
