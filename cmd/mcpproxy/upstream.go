package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/mcptools"
)

// connectUpstream starts or reaches the upstream MCP server and returns
// its session. The client's multi-round-trip handling is off: a result
// that needs input goes back to the proxy's client, which can answer it.
// A command's stderr goes to the proxy's.
func connectUpstream(ctx context.Context, o options, stderr io.Writer) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: mcptools.ProxyName, Version: mcptools.ProxyVersion},
		&mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	var t mcp.Transport
	if o.upstreamURL != "" {
		t = &mcp.StreamableClientTransport{Endpoint: o.upstreamURL}
	} else {
		cmd := exec.Command(o.command[0], o.command[1:]...)
		cmd.Stderr = stderr
		t = &mcp.CommandTransport{Command: cmd}
	}
	cs, err := mcptools.Connect(ctx, client, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to the upstream: %w", err)
	}
	return cs, nil
}
