package contract

import "encoding/hex"

// Sum is a SHA-256 digest: a call's key or its fingerprint. Package keyhash
// computes them (keyhash.Sum is this type).
type Sum [32]byte

// String returns the digest in lower-case hex.
func (s Sum) String() string { return hex.EncodeToString(s[:]) }

// IsZero reports whether s is the zero value, which no hash produces.
func (s Sum) IsZero() bool { return s == Sum{} }
