package pgha

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The tests share one formation, started by the first that needs it
// (about 20 s) and stopped by TestMain. They run one at a time (none is
// parallel: they kill its nodes) and each first sets the replication mode
// it needs, which also waits for the formation to be at rest.
var shared struct {
	once sync.Once
	f    *Formation
	err  error
}

func formation(t *testing.T) *Formation {
	t.Helper()
	shared.once.Do(func() {
		start := time.Now()
		shared.f, shared.err = Start(context.Background(), Options{})
		if shared.err == nil {
			t.Logf("the formation formed in %v", time.Since(start).Round(time.Millisecond))
		}
	})
	if shared.err != nil {
		if _, ok := shared.err.(*noDockerError); ok && !inCI() {
			t.Skipf("pgha: %v", shared.err)
		}
		t.Fatalf("%v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if logs, err := shared.f.Logs(context.Background()); err == nil {
				t.Logf("the formation's last log lines:\n%s", tail(logs, 80))
			}
		}
	})
	return shared.f
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.f != nil {
		if err := shared.f.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "pgha: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
