package idemotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// instruments are the metrics of one Instrumentation.
type instruments struct {
	calls                 metric.Int64Counter
	callDuration          metric.Float64Histogram
	toolDuration          metric.Float64Histogram
	claims                metric.Int64Counter
	waits                 metric.Int64Counter
	takeovers             metric.Int64Counter
	fingerprintMismatches metric.Int64Counter
	leasesLost            metric.Int64Counter
	cleanupRemoved        metric.Int64Counter
	storeDuration         metric.Float64Histogram
}

func newInstruments(m metric.Meter) (instruments, error) {
	var (
		i    instruments
		errs []error
	)
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	i.calls = counter(MetricCalls, "{call}", "Tool calls handled by the idempotent executor, by outcome.")
	i.callDuration = histogram(MetricCallDuration, "Duration of a tool call through the idempotent executor, replays included.", callBuckets)
	i.toolDuration = histogram(MetricToolDuration, "Duration of a tool's own execution; replays do not run the tool.", toolBuckets)
	i.claims = counter(MetricClaims, "{call}", "Tool calls that held a claim on their key.")
	i.waits = counter(MetricWaits, "{call}", "Tool calls that waited for an identical call, in this process or on the store.")
	i.takeovers = counter(MetricTakeovers, "{claim}", "Claims granted over an expired lease: the earlier attempt's outcome was unknown.")
	i.fingerprintMismatches = counter(MetricFingerprintMismatches, "{call}", "Tool calls refused because their key holds a call with other arguments.")
	i.leasesLost = counter(MetricLeasesLost, "{call}", "Tool calls whose lease was lost while they ran; their outcome was not stored.")
	i.cleanupRemoved = counter(MetricCleanupRemoved, "{record}", "Records of expired scopes removed by cleanup.")
	i.storeDuration = histogram(MetricStoreDuration, "Duration of a store operation.", storeBuckets)
	return i, errors.Join(errs...)
}
