package executor

import (
	"context"
	"log/slog"

	"github.com/idemstore/idemstore/store"
)

// debug logs one line about ent at debug level. The Enabled check keeps the
// replay path free of logging cost when debug lines are not wanted (the
// default logger discards everything).
func (e *Idempotent) debug(ctx context.Context, msg, scope string, ent store.Entry, attrs ...slog.Attr) {
	if !e.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelDebug, msg, entryAttrs(scope, ent, attrs)...)
}

// warn logs a problem an operator should see: an outcome that could not be
// stored, a claim that could not be released.
func (e *Idempotent) warn(ctx context.Context, msg, scope string, ent store.Entry, err error) {
	e.log.LogAttrs(ctx, slog.LevelWarn, msg, entryAttrs(scope, ent, []slog.Attr{slog.Any("error", err)})...)
}

func entryAttrs(scope string, ent store.Entry, attrs []slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String("scope", scope),
		slog.String("tool", ent.Tool),
		slog.String("key", ent.Key.String()),
	}, attrs...)
}
