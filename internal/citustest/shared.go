package citustest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// shared is the coordinator of one test binary, found or started by the first
// URL call and stopped by Main.
var shared struct {
	once   sync.Once
	log    bufferLogger
	url    string
	source string       // which source it came from, for the logs
	stop   func() error // nil for a coordinator citustest did not start
	err    error
	// cluster is the cluster.sh cluster the coordinator belongs to, nil
	// for other sources (nodes.go stops and starts its nodes).
	cluster *scriptCluster

	logged sync.Once // the first URL call logs how the search went
}

// URL returns the URL of the coordinator of this test binary, finding or
// starting it on first use (see the package documentation for where it comes
// from; a failed start is not retried). It logs which source it used. Without
// any source it skips t, or fails it when CI is set.
func URL(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		shared.url, shared.source, shared.stop, shared.cluster, shared.err = find(context.Background(), &shared.log)
		if shared.err != nil {
			if logs := shared.log.String(); logs != "" {
				shared.err = fmt.Errorf("%w\nwhile looking:\n%s", shared.err, logs)
			}
		}
	})
	if shared.err != nil {
		unavailable(t, shared.err)
	}
	t.Logf("citustest: coordinator from %s", shared.source)
	shared.logged.Do(func() {
		if notes := shared.log.String(); notes != "" {
			t.Logf("citustest: while looking for it:\n%s", notes)
		}
	})
	return shared.url
}

// Source says where the coordinator of this test binary came from ("" before
// the first URL call or when none was found).
func Source() string { return shared.source }

// find tries the sources in order; see the package documentation. Reasons
// for passing a source over are kept, so that the error of a machine with no
// source at all lists them. cluster is the cluster.sh cluster it started,
// if that was the source.
func find(ctx context.Context, log *bufferLogger) (url, source string, stop func() error, cluster *scriptCluster, err error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, EnvURL, nil, nil, nil
	}
	var reasons []string
	var ue *unavailableError

	c, u, err := startContainer(ctx, log)
	switch {
	case err == nil:
		return u, c.String(), c.stop, nil, nil
	case errors.As(err, &ue):
		reasons = append(reasons, ue.reasons...)
		log.Printf("citustest: Docker passed over: %s", strings.Join(ue.reasons, "; "))
	default:
		return "", "", nil, nil, err
	}

	sc, u, err := startScripts(ctx, func(s string) { log.Printf("citustest: %s", s) })
	switch {
	case err == nil:
		return u, sc.String(), func() error { return sc.stop(context.Background()) }, sc, nil
	case errors.As(err, &ue):
		reasons = append(reasons, ue.reasons...)
		return "", "", nil, nil, &unavailableError{reasons: reasons}
	default:
		return "", "", nil, nil, err
	}
}

// Main runs the tests of a package, stops the coordinator if citustest
// started one, then checks that no goroutine leaked (goleak.Find with opts).
// It returns the exit code:
//
//	func TestMain(m *testing.M) { os.Exit(citustest.Main(m)) }
func Main(m *testing.M, opts ...goleak.Option) int {
	code := m.Run()
	if shared.source != "" && testing.Verbose() {
		fmt.Fprintf(os.Stderr, "citustest: the coordinator came from %s\n%s", shared.source, shared.log.String())
	}
	if shared.stop != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "citustest: stop the coordinator (%s): %v\n", shared.source, err)
			if code == 0 {
				code = 1
			}
		}
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "citustest: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	return code
}

// bufferLogger keeps the progress lines of the search (and of
// testcontainers), which outlives any one test, for the error message if no
// coordinator is found.
type bufferLogger struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *bufferLogger) Printf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.buf, format, v...)
	l.buf.WriteByte('\n')
}

func (l *bufferLogger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
