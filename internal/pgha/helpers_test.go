package pgha

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// errorClass names what kind of error a client got, for the report of
// which errors a failover gives: the SQLSTATE of a server error, else the
// Go error's text (connection-level failures carry no SQLSTATE).
func errorClass(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Sprintf("SQLSTATE %s (%s)", pgErr.Code, pgErr.Message)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "no SQLSTATE: " + err.Error()
}

// connect opens a connection closed when t ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { closeQuietly(conn) })
	return conn
}

// newTable creates a table of ids in the postgres database through the
// formation's URL, dropped when t ends, and returns its name.
func newTable(t *testing.T, f *Formation, name string) string {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, f.URL())
	table := pgx.Identifier{name}.Sanitize()
	_, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+table+"; CREATE TABLE "+table+" (id bigint PRIMARY KEY)")
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, f.URL())
		if err != nil {
			t.Logf("drop %s: %v", table, err)
			return
		}
		defer closeQuietly(c)
		if _, err := c.Exec(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			t.Logf("drop %s: %v", table, err)
		}
	})
	return table
}

// ids returns the set of ids in table on the node at url.
func ids(t *testing.T, url, table string) map[int64]bool {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, url)
	rows, err := conn.Query(ctx, "SELECT id FROM "+table)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	set := make(map[int64]bool, len(got))
	for _, id := range got {
		set[id] = true
	}
	return set
}
