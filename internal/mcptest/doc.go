// Package mcptest is an MCP server for idemstore's tests and docs, built on
// the official Go SDK: a few tools whose side effects are counted in a run
// log, so that a test can tell how often each tool really ran, whichever
// process ran it.
//
// The tools:
//   - send: the side effect. It appends a line to the run log and answers with
//     text and structured content whose bytes a re-encoding would change (a
//     key order that is not sorted, an integer beyond 2^53, a decimal with a
//     trailing zero), so that a test can check they are kept byte for byte;
//   - fail: appends a line and reports a tool error (isError);
//   - ask: asks the client to confirm (an input-required result, or an
//     elicitation for clients of older protocols), and appends a line only
//     once confirmed;
//   - meta: no side effect; answers with the request's _meta, so that a test
//     sees what reached the server;
//   - crash: appends a line, then ends the server's process without
//     answering: a side effect whose outcome the caller cannot know.
//
// A test binary becomes the server when run with ServeArg (MaybeServe, from
// TestMain), so tests start it as a real process without building anything;
// cmd/mcptestserver is the same server as a command, for the docs.
package mcptest
