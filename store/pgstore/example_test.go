package pgstore_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/pgstore"
)

// Open the store over your pool, after migrating its schema once per
// deploy (go run github.com/idemstore/idemstore/cmd/migrate -schema idemstore up),
// and run a cleaner in at least one process.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: "idemstore", DefaultScopeTTL: 6 * time.Hour})
	if err != nil {
		log.Fatal(err) // a *schema.NotMigratedError names the migrate command to run
	}
	defer st.Close()

	cleaner, err := pgstore.NewCleaner(st, pgstore.CleanerConfig{Interval: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	if err := cleaner.Start(); err != nil {
		log.Fatal(err)
	}
	defer cleaner.Stop()
}

// A tool whose side effect is a write to the same database stores its
// outcome in the same transaction: the write and the record commit together
// or not at all.
func ExampleStore_CompleteTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	e := store.Entry{
		Key:         keyhash.IDKey("invoice-42"),
		Fingerprint: keyhash.Fingerprint("create_invoice", []byte(`{"amount":100}`)),
		Tool:        "create_invoice",
	}
	res, err := st.Claim(ctx, "run-7", e, time.Minute, store.WriteOptions{})
	if err != nil || res.State != store.ClaimGranted {
		return // replay res.Record, or wait for the holder
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO invoices (id, amount) VALUES ('42', 100)"); err != nil {
			return err
		}
		_, err := st.CompleteTx(ctx, tx, res.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte(`{"invoice":"42"}`)})
		return err
	})
	if err != nil {
		// Nothing was written: give the claim up so the next caller runs it.
		_ = st.Release(ctx, res.Claim, err.Error())
	}
}
