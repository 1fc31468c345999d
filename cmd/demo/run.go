package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	agent "github.com/idemstore/idemstore/runtime"
	"github.com/idemstore/idemstore/store"
)

// run plays the scenario of opts and writes its report to w: a header, the
// runtime's progress steps as it reports them, the answer, any typed error
// a call was refused with, and one line per tool with its real run count,
// the side-effecting send_mail last. With -serve-openai it serves the
// scenario's model instead (see serve).
func run(ctx context.Context, w io.Writer, opts options) error {
	sc, ok := scenarios[opts.scenario]
	if !ok {
		return fmt.Errorf("unknown scenario %q; one of: %s", opts.scenario, scenarioList())
	}
	if opts.serveOpenAI != "" {
		return serve(ctx, w, opts)
	}
	model, about, err := newModel(sc, opts)
	if err != nil {
		return err
	}
	st, closeStore, err := openStore(ctx, opts)
	if err != nil {
		return fmt.Errorf("opening the store: %w", err)
	}
	defer closeStore()
	tel, err := newTelemetry(opts, w)
	if err != nil {
		return err
	}
	defer tel.shutdown(context.WithoutCancel(ctx))
	if st, err = tel.wrap(st); err != nil {
		return err
	}

	tl, err := newTools(sc)
	if err != nil {
		return fmt.Errorf("registering the tools: %w", err)
	}
	rt, err := agent.New(&agent.Config{
		Model:        model,
		Tools:        tl.registry,
		Store:        st,
		Executor:     tel.executor,
		QualityGates: []agent.Gate{gate()},
		Progress:     func(step string) { fmt.Fprintln(w, step) },
	})
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "scenario %s: %s\n", opts.scenario, sc.about)
	fmt.Fprintf(w, "scope %s (-execution-id), %s\n", opts.scope, storeName(opts))
	if about != "" {
		fmt.Fprintln(w, about)
	}
	runCtx, span := tel.tracer.Start(ctx, "invoke_agent demo")
	tr, runErr := rt.Run(runCtx, opts.scope, "Welcome customer "+customerID+" by e-mail.")
	span.End()
	if tr.Answer != "" {
		fmt.Fprintln(w, "answer:", tr.Answer)
	}
	for _, e := range tr.Calls {
		// store.MismatchError is an alias, so %T would print the package
		// that defines it; the demo names the type as a user writes it.
		var mm *store.MismatchError
		if errors.As(e.Err, &mm) {
			fmt.Fprintf(w, "typed error on %s (gate attempt %d): *store.MismatchError, errors.Is(err, store.ErrFingerprintMismatch) = %t\n  %v\n",
				e.Call.Tool, e.GateAttempt, errors.Is(e.Err, store.ErrFingerprintMismatch), e.Err)
		}
	}
	fmt.Fprintln(w, "reads: "+ranTimes(toolLookup, int(tl.lookups.Load())))
	fmt.Fprintln(w, "side effects: "+ranTimes(toolSend, int(tl.sends.Load())))
	return runErr
}

// ranTimes says "NAME ran N time(s)".
func ranTimes(tool string, n int) string {
	if n == 1 {
		return tool + " ran 1 time"
	}
	return tool + " ran " + strconv.Itoa(n) + " times"
}
