package citustest

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Environment variables citustest reads.
const (
	// EnvURL names a Citus coordinator to use instead of starting one.
	EnvURL = "TEST_CITUS_URL"
	// EnvImage names the Citus image to start with Docker; Defaults to
	// DefaultImage.
	EnvImage = "IDEMSTORE_TEST_CITUS_IMAGE"
	// EnvDir names the directory of build.sh and cluster.sh; Defaults to the
	// nearest shared/citus beside the module root or one of its parents.
	EnvDir = "IDEMSTORE_CITUS_DIR"
	// EnvCI, when set (and not "false" or "0"), turns every skip for want of
	// Citus into a failure.
	EnvCI = "CI"
)

// DefaultImage is the official Citus image (single node: the coordinator
// holds the shards), for machines whose Docker can pull it.
const DefaultImage = "citusdata/citus:13.2.0"

// inCI reports whether a missing Citus must fail tests instead of skipping
// them.
func inCI() bool {
	v := strings.TrimSpace(os.Getenv(EnvCI))
	return v != "" && v != "false" && v != "0"
}

// unavailableError says that no source of a coordinator applies on this
// machine (each reason says why one was passed over); tests skip on it
// outside CI.
type unavailableError struct{ reasons []string }

func (e *unavailableError) Error() string {
	return "no Citus coordinator: " + strings.Join(e.reasons, "; ")
}

// unavailable skips t when no source applies and CI is not set, and fails it
// otherwise.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if mayskip(err, inCI()) {
		t.Skipf("citustest: no Citus for this test: set %s, or run as root with %s (or %s) holding build.sh and cluster.sh (%v)",
			EnvURL, EnvDir, "../shared/citus", err)
	}
	t.Fatalf("citustest: %v", err)
}

// mayskip reports whether a test may skip for err: only when no source of a
// coordinator applies, and never in CI.
func mayskip(err error, ci bool) bool {
	var ue *unavailableError
	return errors.As(err, &ue) && !ci
}
