package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// keySpace chooses the calls the workers make. Keys come from time slots
// shared by every process (the machine has one clock): within a slot, all
// goroutines of all workers draw from the same few keys, so identical calls
// of several processes race within milliseconds of each other; a new slot
// brings new keys, so tools keep running (a key that was stored is only
// replayed). Some calls go back to older slots, which replays stored
// outcomes and takes over the claims of killed workers.
type keySpace struct {
	SlotMillis  int64 // length of a slot
	KeysPerSlot int64 // keys drawn from in one slot
	// LongScopes is how many long-lived scopes there are; their records
	// outlive the run, so every acknowledged outcome in them is checked
	// against the final records.
	LongScopes int
	// ShortShare is the share of calls made in a short-lived scope. Such a
	// scope is named after the current ShortPeriodMillis period and expires
	// ShortScopeTTL after its first write, before the period ends, so calls
	// start, run and complete across its expiry while cleanup runs.
	ShortShare        float64
	ShortPeriodMillis int64
	// RevisitShare is the share of calls that go back up to RevisitSlots
	// slots. That reach should cover a few leases: the claims a killed
	// worker left are asked for again once their lease ran out, and taken
	// over.
	RevisitShare float64
	RevisitSlots int64
	// ProbeShare is the share of calls made in probe-then-store mode
	// (KindProbe, in a probe-N scope), ChargeShare the share of charges
	// through the payments API (KindCharge, in a charge-N scope). Both kinds
	// live in scopes of their own, as long-lived as the long-N ones, so
	// that each mode's records are checked by that mode's rules.
	ProbeShare  float64
	ChargeShare float64
}

// defaultKeySpace suits a lease of a few hundred milliseconds.
func defaultKeySpace() keySpace {
	return keySpace{
		SlotMillis:        40,
		KeysPerSlot:       3,
		LongScopes:        2,
		ShortShare:        0.25,
		ShortPeriodMillis: 2000,
		RevisitShare:      0.15,
		RevisitSlots:      40,
		ProbeShare:        0.15,
		ChargeShare:       0.15,
	}
}

// Scope prefixes. Each family of scopes is checked by its own rules
// (familyOf): long- and short- by the exclusive executor's, probe- by
// probe-then-store's, charge- by the downstream key's.
const (
	prefixLong   = "long-"
	prefixShort  = "short-"
	prefixProbe  = "probe-"
	prefixCharge = "charge-"
)

// family is the set of rules a scope's records are checked by.
type family uint8

const (
	famExclusive family = iota // long- and short- scopes: remote-like and transactional tools
	famProbe                   // probe- scopes: probe-then-store mode
	famCharge                  // charge- scopes: the downstream-key example
)

func familyOf(scope string) family {
	switch {
	case strings.HasPrefix(scope, prefixProbe):
		return famProbe
	case strings.HasPrefix(scope, prefixCharge):
		return famCharge
	}
	return famExclusive
}

// isLongScope tells the scopes whose records outlive the run (all but
// short-), so that every acknowledged outcome in them is checked against
// the final records.
func isLongScope(scope string) bool { return !strings.HasPrefix(scope, prefixShort) }

// callSpec is one chosen call.
type callSpec struct {
	Scope string
	Long  bool // in a long-lived scope
	Kind  Kind
	N     int64 // the call's argument
}

// next chooses a call at time now.
func (k keySpace) next(rng *rand.Rand, now time.Time) callSpec {
	ms := now.UnixMilli()
	slot := ms / k.SlotMillis
	if rng.Float64() < k.RevisitShare {
		slot -= 1 + rng.Int64N(k.RevisitSlots)
	}
	n := slot*k.KeysPerSlot + rng.Int64N(k.KeysPerSlot)
	long := rng.IntN(k.LongScopes)
	switch r := rng.Float64(); {
	case r < k.ShortShare:
		// Only the remote-like tool runs in short-lived scopes: a call
		// asked for again after its scope expired runs again by contract,
		// which the transactional example must never do.
		return callSpec{Scope: fmt.Sprintf("%s%d", prefixShort, ms/k.ShortPeriodMillis), Kind: KindRemote, N: n}
	case r < k.ShortShare+k.ProbeShare:
		return callSpec{Scope: fmt.Sprintf("%s%d", prefixProbe, long), Long: true, Kind: KindProbe, N: n}
	case r < k.ShortShare+k.ProbeShare+k.ChargeShare:
		return callSpec{Scope: fmt.Sprintf("%s%d", prefixCharge, long), Long: true, Kind: KindCharge, N: n}
	}
	kind := KindRemote
	if n%2 == 1 {
		kind = KindOrder
	}
	return callSpec{Scope: fmt.Sprintf("%s%d", prefixLong, long), Long: true, Kind: kind, N: n}
}

// toolName is the tool a kind of call runs under.
func toolName(k Kind) string { return "chaos_" + string(k) }

// args returns the call's JSON arguments. A charge's are a charge request
// of the payments API, its customer naming the call (chargeCustomer), so
// that the API's charges can be told apart by call.
func (c callSpec) args() json.RawMessage {
	if c.Kind == KindCharge {
		return json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"eur","customer":%q}`,
			100+c.N%900, chargeCustomer(c.Scope, c.N)))
	}
	return json.RawMessage(fmt.Sprintf(`{"n":%d}`, c.N))
}

// chargeCustomer is the customer a charge call charges: one per call, so
// the API's charges per customer are its charges per call.
func chargeCustomer(scope string, n int64) string {
	return fmt.Sprintf("cus_%s_%d", scope, n)
}

// parseChargeCustomer is the inverse of chargeCustomer.
func parseChargeCustomer(customer string) (scope string, n int64, ok bool) {
	rest, found := strings.CutPrefix(customer, "cus_")
	i := strings.LastIndexByte(rest, '_')
	if !found || i < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || chargeCustomer(rest[:i], n) != customer {
		return "", 0, false
	}
	return rest[:i], n, true
}

// key returns the call's key in hex, as the executor derives it.
func (c callSpec) key() (string, error) {
	canon, err := keyhash.Canonicalize(c.args(), store.Limits{})
	if err != nil {
		return "", err
	}
	return keyhash.ArgsKey(toolName(c.Kind), canon).String(), nil
}
