package idemotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// CleanupRemoved returns a function that counts records removed by cleanup
// in idemstore.cleanup.removed, with db.namespace set to namespace (the
// schema; "" leaves it out), for pgstore.CleanerConfig.OnRemoved:
//
//	pgstore.NewCleaner(st, pgstore.CleanerConfig{OnRemoved: tel.CleanupRemoved(st.Schema())})
//
// It is safe for concurrent use. A cleaner's own RemoveExpired calls do not
// go through a wrapped store, so they are counted here and only here. On a
// nil *Instrumentation, or a zero one (not made by New), it returns a
// function that counts nothing: the cleaner calls it in its own goroutine,
// where a panic would end the process.
func (in *Instrumentation) CleanupRemoved(namespace string) func(n int) {
	if !in.made() {
		return func(int) {}
	}
	var set attribute.Set
	if namespace != "" {
		// Made valid and bounded as on spans: this has no error to return.
		set = attribute.NewSet(semconv.DBNamespace(spanString(namespace)))
	}
	opt := metric.WithAttributeSet(set)
	return func(n int) {
		if n > 0 {
			in.m.cleanupRemoved.Add(context.Background(), int64(n), opt)
		}
	}
}
