package citustest

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrUnavailable matches Start's error when no source of a coordinator
// applies on this machine (no TEST_CITUS_URL, no Docker that has or can
// pull the image, no scripts or not root): a caller may carry on without
// Citus and say so.
var ErrUnavailable = errors.New("citustest: no Citus coordinator on this machine")

// Start finds or starts a Citus coordinator for a program rather than a
// test (cmd/benchpath measures on it): the sources of the package
// documentation, in the same order. It returns the coordinator's URL, the
// source it came from, and stop, which stops what Start started (nothing
// for TEST_CITUS_URL) and must be called. Each progress line of the search
// goes to logf. The coordinator is the caller's own, not the one URL shares
// with tests.
func Start(ctx context.Context, logf func(line string)) (url, source string, stop func() error, err error) {
	var log bufferLogger
	url, source, stop, _, err = find(ctx, &log)
	for l := range strings.Lines(log.String()) {
		logf(strings.TrimSuffix(l, "\n"))
	}
	var ue *unavailableError
	switch {
	case errors.As(err, &ue):
		return "", "", nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case err != nil:
		return "", "", nil, err
	case stop == nil:
		stop = func() error { return nil }
	}
	return url, source, stop, nil
}
