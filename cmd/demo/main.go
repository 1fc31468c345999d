// Command demo shows idemstore at work in an agent loop: a quality gate
// rejects the model's first answer, the model asks for the same tool calls
// again, and the side-effecting call is replayed instead of run twice.
//
// Usage:
//
//	go run ./cmd/demo [-scenario retry|clean|mismatch|failure] [-execution-id SCOPE] [-database-url URL [-schema NAME]]
//	go run ./cmd/demo -model openai [-base-url URL] [-model-name NAME]
//	go run ./cmd/demo -serve-openai 127.0.0.1:8080
//	go run ./cmd/demo -otel stdout
//
// -execution-id is the run's scope: the demo passes it to Run, and only a
// run of the same scope replays what this one stored (give the same one
// twice with -database-url to see a second run replay every call).
//
// It prints the progress steps as the runtime reports them, then how many
// times each tool really ran, ending with a line such as
// "side effects: send_mail ran 1 time". By default the model is the
// scenario's scripted one, offline; -model openai asks an OpenAI-compatible
// endpoint instead (key from OPENAI_API_KEY), and -serve-openai serves the
// scripted model as such an endpoint, to try that offline (docs/openai.md).
// -otel stdout also prints the run's OpenTelemetry spans (package
// idemotel), one JSON object per line, the replayed calls marked
// idemstore.replayed (docs/observability.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2) // the flag package has said what is wrong
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}
