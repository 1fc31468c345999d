package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/idemstore/idemstore/runtime/openaimodel/openaitest"
)

// shutdownTimeout bounds the wait for requests in progress when the served
// endpoint stops.
const shutdownTimeout = 5 * time.Second

// serve listens on opts.serveOpenAI and serves the scenario's scripted
// model there until ctx is done (Ctrl-C).
func serve(ctx context.Context, w io.Writer, opts options) error {
	ln, err := net.Listen("tcp", opts.serveOpenAI)
	if err != nil {
		return fmt.Errorf("-serve-openai: %w", err)
	}
	return serveOpenAI(ctx, w, ln, opts.scenario)
}

// serveOpenAI serves the scripted model of scenario as an OpenAI-compatible
// chat-completions endpoint on ln, until ctx is done. The model reads its
// attempt from each conversation, so it serves any number of demo runs.
func serveOpenAI(ctx context.Context, w io.Writer, ln net.Listener, scenario string) error {
	srv := &http.Server{
		Handler:           openaitest.NewEndpoint(openaitest.ModelHandler(scenarios[scenario].model())),
		ReadHeaderTimeout: 10 * time.Second,
	}
	base := "http://" + ln.Addr().String() + "/v1"
	fmt.Fprintf(w, "serving the scripted model of scenario %s as an OpenAI-compatible endpoint at %s\n", scenario, base)
	fmt.Fprintf(w, "in another terminal: go run ./cmd/demo -model openai -base-url %s -model-name demo -scenario %s\n", base, scenario)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(stop)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
