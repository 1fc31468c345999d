package txorder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemstore/idemstore/examples/txorder"
	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/store/pgstore"
)

// Run the order tool through an idempotent executor over the PostgreSQL
// store of the same database: the order and the call's outcome commit
// together, so asking again replays the order instead of placing another.
// (No Output: it needs a database, DATABASE_URL, migrated with cmd/migrate.)
func ExampleOrderTool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, nil) // schema "idemstore", migrated with cmd/migrate
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := txorder.CreateOrdersTable(ctx, pool, txorder.DefaultSchema); err != nil {
		log.Fatal(err) // in production: your own migrations
	}

	ex, err := executor.New(&txorder.OrderTool{Store: st}, st, nil)
	if err != nil {
		log.Fatal(err)
	}
	exec := ex.ForScope("run-7")
	call := executor.Call{Tool: "place_order", Args: json.RawMessage(`{"customer":"cus_42","item":"book","quantity":2}`)}
	for range 2 {
		res, err := exec.Execute(ctx, call)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s replayed=%v\n", res.Output, res.Replayed)
	}
}
