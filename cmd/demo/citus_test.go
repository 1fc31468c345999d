package main

import (
	"testing"

	"github.com/idemstore/idemstore/internal/citustest"
)

// The demo on a Citus coordinator, its schema distributed by scope
// (citustest.NewSchema runs migrate distribute's migrations.Distribute):
// `go run ./cmd/demo -database-url COORDINATOR` replays everything on its
// second run, as on PostgreSQL.
func TestSecondRunOnCitusReplaysEverySideEffect(t *testing.T) {
	t.Parallel()
	_, schema := citustest.NewSchema(t)
	requireSecondRunReplays(t, citustest.URL(t), schema)
}

// Four demo processes at once on the coordinator send the mail once in
// total: the claim is decided on the worker that holds the scope, and the
// waiters, listening on the coordinator, are woken from there.
func TestConcurrentDemoProcessesOnCitusSendTheMailOnceInTotal(t *testing.T) {
	t.Parallel()
	_, schema := citustest.NewSchema(t)
	requireConcurrentDemosSendOnce(t, citustest.URL(t), schema)
}
