package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/mcptools"
)

// httpPath is where the proxy serves streamable HTTP.
const httpPath = "/mcp"

// shutdownTimeout bounds the wait for HTTP requests in progress at exit.
const shutdownTimeout = 5 * time.Second

// errUpstreamGone ends the proxy when its upstream's session ends: every
// call would fail.
var errUpstreamGone = errors.New("the upstream MCP server closed the session")

// run is the proxy: it parses args, opens the store, connects the upstream
// and serves clients until ctx is done, the (stdio) client leaves, or the
// upstream goes.
func run(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	st, closeStore, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeStore()
	upstream, err := connectUpstream(ctx, o, stderr)
	if err != nil {
		return err
	}
	defer upstream.Close()
	proxy, err := mcptools.NewProxy(ctx, upstream, &mcptools.ProxyConfig{
		Store: st, Executor: &executor.Config{Logger: log}, Logger: log,
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = upstream.Wait()
		cancel(errUpstreamGone)
	}()
	defer func() { <-watched }()
	defer upstream.Close() // ends the watcher, before it is waited for

	if o.listen == "" {
		err = proxy.Server().Run(ctx, &mcp.IOTransport{Reader: stdin, Writer: stdout})
	} else {
		err = serveHTTP(ctx, o.listen, o.sessionTimeout, proxy.Server(), stderr)
	}
	if cause := context.Cause(ctx); errors.Is(cause, errUpstreamGone) {
		return cause
	}
	if ctx.Err() != nil {
		return nil // interrupted: a normal stop
	}
	return err
}

// serveHTTP serves server over streamable HTTP at addr until ctx is done.
// It says where on stderr, which is how a caller that asked for port 0
// learns the port.
func serveHTTP(ctx context.Context, addr string, sessionTimeout time.Duration, server *mcp.Server, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(httpPath, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{SessionTimeout: sessionTimeout}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "mcpproxy: serving MCP over streamable HTTP at http://%s%s\n", ln.Addr(), httpPath)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close() // streams still open (SSE): cut them
	}
	<-served
	return nil
}
