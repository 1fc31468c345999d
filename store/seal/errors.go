package seal

import (
	"errors"
	"fmt"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
)

// ErrSealed: a stored result cannot be opened (see OpenError). It is
// permanent: the same read fails the same way until an operator acts
// (configures the missing key, or deletes the record's scope), so
// errors.Is(err, contract.ErrRefused) holds too and contract.ClassOf says
// ClassPermanent.
var ErrSealed = errors.New("idemstore: stored result cannot be opened")

// OpenError reports a stored result that a store refuses to hand out: it
// was changed, moved from another record, sealed with a key this process
// does not have, or is plaintext where plaintext is refused. The store
// returns it instead of the record, and never replays the result.
type OpenError struct {
	Scope string
	Key   keyhash.Sum
	// KeyID names the key the result says sealed it; zero when the
	// result names none (plaintext, or too short to carry a header).
	KeyID KeyID
	// Problem says what is wrong, for an operator.
	Problem string
}

func (e *OpenError) Error() string {
	id := ""
	if e.KeyID != 0 {
		id = fmt.Sprintf(" (key id %d)", e.KeyID)
	}
	return fmt.Sprintf("idemstore: stored result cannot be opened: scope %s key %s%s: %s",
		contract.Quote(e.Scope), e.Key, id, e.Problem)
}

// Unwrap makes errors.Is(err, ErrSealed) and errors.Is(err,
// contract.ErrRefused) true: retrying will not help until an operator acts.
func (e *OpenError) Unwrap() []error { return []error{ErrSealed, contract.ErrRefused} }

// Problems an OpenError names.
const (
	problemTampered = "authentication failed: the result was changed, or moved from another record " +
		"(its scope, key, fingerprint or outcome kind differ from those it was sealed for)"
	problemShort = "too short to be a sealed result"
	// problemNoKeyID: the header names key id 0, which no key has.
	problemNoKeyID = "names key id 0, which no key has (it is reserved): the result was changed, or never sealed"
)

// problemPlaintext is the problem of a result stored in clear where
// plaintext is refused.
const problemPlaintext = "the result is stored in clear and plaintext is refused (seal.Config.RefusePlaintext): " +
	"written before sealing was on, or by a process without keys, or forged by SQL; reseal it if it is genuine"
