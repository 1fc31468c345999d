package executor

import (
	"context"
	"log/slog"

	"github.com/idemstore/idemstore/store"
)

// debug logs one line about ent at debug level. The nil check keeps the hit
// path free of logging cost when no logger is configured.
func (e *Idempotent) debug(ctx context.Context, msg string, ent store.Entry, attrs ...slog.Attr) {
	if e.log == nil || !e.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelDebug, msg, e.entryAttrs(ent, attrs)...)
}

// warn logs a problem an operator should see: an outcome that could not be
// stored, a claim that could not be released.
func (e *Idempotent) warn(ctx context.Context, msg string, ent store.Entry, err error) {
	if e.log == nil {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, msg, e.entryAttrs(ent, []slog.Attr{slog.Any("error", err)})...)
}

func (e *Idempotent) entryAttrs(ent store.Entry, attrs []slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String("scope", e.scope),
		slog.String("tool", ent.Tool),
		slog.String("key", ent.Key.String()),
	}, attrs...)
}
