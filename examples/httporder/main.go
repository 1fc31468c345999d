// Command httporder is an example HTTP service that creates orders behind
// the Idempotency-Key middleware (package httpidem) on the PostgreSQL store:
// a client that retries POST /orders with the same key after a timeout, a
// dropped connection or a crash of the server gets the one order created,
// never a second.
//
// The handler inserts the order and stores its response in one
// transaction (httpidem.CommitTx), so the order exists if and only if its
// response is stored: a server killed at any point creates the order once.
//
// Start it with one command (it migrates its schema and creates its table):
//
//	go run ./examples/httporder -database-url "$DATABASE_URL"
//
// then, twice with the same key (the second answer carries
// Idempotent-Replayed: true and the same order):
//
//	curl -i -X POST localhost:8080/orders -H 'X-Customer: cus_42' \
//	     -H 'Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"' \
//	     -H 'Content-Type: application/json' -d '{"item":"book","quantity":2}'
//
// docs/http.md walks through it and says how a client should retry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/migrations"
	"github.com/idemstore/idemstore/store/pgstore"
)

// defaultSchema holds both the store's tables and the orders table.
const defaultSchema = "httporder"

// shutdownTimeout bounds the wait for running requests on SIGINT/SIGTERM.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, faults{}); err != nil {
		fmt.Fprintln(os.Stderr, "httporder:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	databaseURL string
	schema      string
	addr        string
	lease       time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("httporder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL (default $DATABASE_URL)")
	fs.StringVar(&o.schema, "schema", defaultSchema, "schema for the store's tables and the orders table (migrated at start)")
	fs.StringVar(&o.addr, "addr", "localhost:8080", "address to listen on")
	fs.DurationVar(&o.lease, "lease", httpidem.DefaultLease, "how long a crashed server's claim blocks its key (409) before a retry takes it over")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if o.databaseURL == "" {
		return options{}, errors.New("no database: pass -database-url or set DATABASE_URL")
	}
	return o, nil
}

// run starts the service and serves until ctx ends. It prints one line,
// "httporder listening on http://ADDR", once it accepts requests.
func run(ctx context.Context, args []string, stdout io.Writer, f faults) error {
	o, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	// Migrating at start keeps the example to one command; a real
	// deployment runs cmd/migrate before it deploys (docs/operations.md).
	if err := migrations.Up(ctx, o.databaseURL, o.schema); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, o.databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := createOrdersTable(ctx, pool, o.schema); err != nil {
		return err
	}
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: o.schema})
	if err != nil {
		return err
	}
	defer st.Close()
	// Expired keys (a day after their first use) are removed in the
	// background; one cleaner per deployment is enough, more do no harm.
	cleaner, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{})
	if err != nil {
		return err
	}
	if err := cleaner.Start(); err != nil {
		return err
	}
	defer cleaner.Stop()

	svc, err := newService(pool, st, o.schema, &httpidem.Config{Lease: o.lease}, f)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: svc.routes(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "httporder listening on http://%s\n", ln.Addr())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
