package contract

import (
	"time"
)

// MaxDuration is the longest lease, scope TTL, renewal or "stuck after" any
// store accepts: 100 years. It keeps every duration far from the overflow of
// time.Duration's int64 nanoseconds, so that no store can turn a very long
// duration into a negative one (an expiry in the past).
const MaxDuration = 100 * 365 * 24 * time.Hour

// CheckDuration refuses a duration that is not positive or is longer than
// MaxDuration, with an *InputError naming field ("lease", "ttl", …). Every
// duration that reaches a store passes through it.
func CheckDuration(field string, d time.Duration) error {
	switch {
	case d <= 0:
		return &InputError{Field: field, Problem: "not positive (" + d.String() + ")"}
	case d > MaxDuration:
		return &InputError{Field: field, Problem: d.String() + " is longer than the maximum " + MaxDuration.String() + " (contract.MaxDuration)"}
	}
	return nil
}

// CheckConfigDuration is CheckDuration for an optional config field, where
// zero means the default: it refuses a negative duration or one over
// MaxDuration with a *ConfigError.
func CheckConfigDuration(config, field string, d time.Duration) error {
	switch {
	case d < 0:
		return &ConfigError{Config: config, Field: field, Problem: "negative (" + d.String() + ")"}
	case d > MaxDuration:
		return &ConfigError{Config: config, Field: field, Problem: d.String() + " is longer than the maximum " + MaxDuration.String() + " (contract.MaxDuration)"}
	}
	return nil
}

// Field is one named duration of a config, for CheckConfigDurations.
type Field struct {
	Name string
	D    time.Duration
}

// CheckConfigDurations runs CheckConfigDuration on each field of the config
// named config, and returns the first error.
func CheckConfigDurations(config string, fields ...Field) error {
	for _, f := range fields {
		if err := CheckConfigDuration(config, f.Name, f.D); err != nil {
			return err
		}
	}
	return nil
}
