package contract

import "log/slog"

// CheckLogger refuses a config's Logger that is a zero slog.Logger (a
// slog.Logger{} literal, no handler): accepted, it panics on its first
// line, on a call path long after the config was taken. nil is allowed
// (every config reads it as "discard").
func CheckLogger(config string, l *slog.Logger) error {
	if l != nil && l.Handler() == nil {
		return &ConfigError{Config: config, Field: "Logger", Problem: "has no handler (a zero slog.Logger): make it with slog.New"}
	}
	return nil
}
