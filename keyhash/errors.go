package keyhash

import (
	"errors"
	"fmt"
)

// ErrInvalidArguments is matched (errors.Is) by every error about malformed
// tool arguments: invalid JSON or UTF-8, duplicate object keys, nesting too deep.
var ErrInvalidArguments = errors.New("idemstore: invalid arguments")

// ErrTooLarge is matched by every error about a value over a configured limit.
var ErrTooLarge = errors.New("idemstore: too large")

// ErrInvalidInput is matched by every error about a malformed identifier
// (empty tool name, empty scope, invalid UTF-8 in an id).
var ErrInvalidInput = errors.New("idemstore: invalid input")

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

// LimitError names the limit a value broke, the value's size and the limit.
type LimitError struct {
	Limit string // e.g. "MaxArgBytes", "MaxDepth", "MaxScopeBytes"
	Value int    // the size or depth seen (for a streamed input, at least this much)
	Max   int    // the configured limit
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("idemstore: too large: %s is %d, limit %s is %d", limitSubject(e.Limit), e.Value, e.Limit, e.Max)
}

// Unwrap makes errors.Is(err, ErrTooLarge) true.
func (e *LimitError) Unwrap() error { return ErrTooLarge }

func limitSubject(limit string) string {
	switch limit {
	case "MaxDepth":
		return "nesting depth"
	default:
		return "size"
	}
}

// InputError names a malformed identifier and what is wrong with it.
type InputError struct {
	Field   string // "scope", "tool", "invocation id"
	Problem string // "empty", "invalid UTF-8"
}

func (e *InputError) Error() string {
	return fmt.Sprintf("idemstore: invalid input: %s: %s", e.Field, e.Problem)
}

// Unwrap makes errors.Is(err, ErrInvalidInput) true.
func (e *InputError) Unwrap() error { return ErrInvalidInput }
