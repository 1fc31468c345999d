package contract

import "fmt"

// InputError names a malformed identifier or parameter and what is wrong
// with it.
type InputError struct {
	Field   string // "scope", "tool", "invocation id", "lease", "ctx", …
	Problem string // "empty", "invalid UTF-8", "not positive", …
}

func (e *InputError) Error() string {
	return fmt.Sprintf("idemstore: invalid input: %s: %s", e.Field, e.Problem)
}

// Unwrap makes errors.Is(err, ErrInvalidInput) true.
func (e *InputError) Unwrap() error { return ErrInvalidInput }

// ConfigError reports a config field that makes no sense, in any package's
// config. It is bad input (errors.Is(err, ErrInvalidInput)), found before
// anything ran.
type ConfigError struct {
	Config  string // the config type, e.g. "pgstore.Config"
	Field   string // e.g. "Schema", "Limits.MaxScopeBytes"
	Problem string // what is wrong; user values in it are quoted with Quote
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("idemstore: invalid config: %s.%s: %s", e.Config, e.Field, e.Problem)
}

// Unwrap makes errors.Is(err, ErrInvalidInput) true.
func (e *ConfigError) Unwrap() error { return ErrInvalidInput }

// LimitError names the limit a value broke, the value's size and the limit.
type LimitError struct {
	Limit string // e.g. "MaxArgBytes", "MaxDepth", "MaxScopeBytes"
	Value int    // the size or depth seen (for a streamed input, at least this much)
	Max   int    // the configured limit
}

func (e *LimitError) Error() string {
	subject := "size"
	if e.Limit == "MaxDepth" {
		subject = "nesting depth"
	}
	return fmt.Sprintf("idemstore: too large: %s is %d, limit %s is %d", subject, e.Value, e.Limit, e.Max)
}

// Unwrap makes errors.Is(err, ErrTooLarge) true.
func (e *LimitError) Unwrap() error { return ErrTooLarge }

// ArgumentsError says what is wrong with a call's arguments and where.
type ArgumentsError struct {
	Problem string // e.g. "duplicate object key \"a\"", "invalid UTF-8"
	Offset  int    // byte offset in the input where the problem was found, -1 if unknown
}

func (e *ArgumentsError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("idemstore: invalid arguments: %s at byte %d", e.Problem, e.Offset)
	}
	return "idemstore: invalid arguments: " + e.Problem
}

// Unwrap makes errors.Is(err, ErrInvalidArguments) true.
func (e *ArgumentsError) Unwrap() error { return ErrInvalidArguments }
