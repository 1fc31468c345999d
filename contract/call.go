package contract

import (
	"fmt"
	"time"
)

// InFlightError reports a live claim that outlasted the caller's wait.
type InFlightError struct {
	Scope      string
	Key        Sum
	LeaseUntil time.Time // when the holder's lease ends unless renewed; zero for an identical call in this process
}

func (e *InFlightError) Error() string {
	if e.LeaseUntil.IsZero() {
		// An identical call in this process is running it.
		return fmt.Sprintf("idemstore: call in flight: scope %s key %s is being run by an identical call in this process", Quote(e.Scope), e.Key)
	}
	return fmt.Sprintf("idemstore: call in flight: scope %s key %s held until %s",
		Quote(e.Scope), e.Key, e.LeaseUntil.Format(time.RFC3339Nano))
}

// Unwrap makes errors.Is(err, ErrInFlight) true.
func (e *InFlightError) Unwrap() error { return ErrInFlight }

// MismatchError reports a key stored or claimed for another call.
type MismatchError struct {
	Scope      string
	Key        Sum
	StoredTool string
	Stored     Sum // fingerprint of the record
	Requested  Sum // fingerprint of the refused call
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("idemstore: fingerprint mismatch: scope %s key %s holds a call of tool %s with fingerprint %s, refused fingerprint %s",
		Quote(e.Scope), e.Key, Quote(e.StoredTool), e.Stored, e.Requested)
}

// Unwrap makes errors.Is(err, ErrFingerprintMismatch) true.
func (e *MismatchError) Unwrap() error { return ErrFingerprintMismatch }

// LeaseLostError reports a fencing token that is no longer current.
type LeaseLostError struct {
	Scope string
	Key   Sum
	Token int64 // the stale token the caller presented
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("idemstore: lease lost: scope %s key %s token %d is no longer current", Quote(e.Scope), e.Key, e.Token)
}

// Unwrap makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }

// CompletedError reports a resolution refused because the record already
// holds an outcome: a stored outcome is never overwritten.
type CompletedError struct {
	Scope string
	Key   Sum
	Token int64 // the completed record's token
}

func (e *CompletedError) Error() string {
	return fmt.Sprintf("idemstore: outcome already stored: scope %s key %s (token %d) is completed and is never overwritten", Quote(e.Scope), e.Key, e.Token)
}

// Unwrap makes errors.Is(err, ErrAlreadyCompleted) true.
func (e *CompletedError) Unwrap() error { return ErrAlreadyCompleted }
