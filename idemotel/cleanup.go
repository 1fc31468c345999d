package idemotel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// CleanupRemoved returns a function that counts records removed by cleanup
// in idemstore.cleanup.removed, with db.system.name postgresql and
// db.namespace set to namespace (the schema; "" leaves it out), for
// pgstore.CleanerConfig.OnRemoved:
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
	// The attributes a wrapped pgstore's RemoveExpired counts with, so
	// that the cleaner's removals and the wrapper's of one store are one
	// series: without db.system.name they were two, and a query for
	// postgresql's removals missed the cleaner's, nearly all of them.
	attrs := []attribute.KeyValue{semconv.DBSystemNameKey.String(SystemPostgreSQL)}
	if namespace != "" {
		// Made valid and bounded as on spans: this has no error to return.
		attrs = append(attrs, semconv.DBNamespace(spanString(namespace)))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return func(n int) {
		if n > 0 {
			in.m.cleanupRemoved.Add(context.Background(), int64(n), opt)
		}
	}
}
