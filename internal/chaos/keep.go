package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"
)

// keptTables are the evidence tables keepEvidence copies out, each with the
// id of the transaction that wrote its rows (xmin): rows written by one
// transaction, or on either side of a failover, can be told apart.
var keptTables = []string{"chaos_audit", "chaos_effects", "chaos_orders", "chaos_probe_runs", "idem_records"}

// keepEvidence copies the evidence tables of schema, as CSV, into dir
// (-chaos.logdir): the checker's report names events by id, and a failed
// run is read from them after its database is gone.
func keepEvidence(ctx context.Context, db *pgxpool.Pool, schema, dir string) error {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for _, table := range keptTables {
		f, err := os.Create(filepath.Join(dir, table+".csv"))
		if err != nil {
			return err
		}
		sql := inSchema(fmt.Sprintf(`COPY (SELECT xmin, * FROM {schema}.%s ORDER BY 2) TO STDOUT (FORMAT csv, HEADER)`, table), schema)
		_, err = conn.Conn().PgConn().CopyTo(ctx, f, sql)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("chaos: keep %s: %w", table, err)
		}
	}
	return nil
}
