package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
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
	}
}

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
	if rng.Float64() < k.ShortShare {
		// Only the remote-like tool runs in short-lived scopes: a call
		// asked for again after its scope expired runs again by contract,
		// which the transactional example must never do.
		return callSpec{Scope: fmt.Sprintf("short-%d", ms/k.ShortPeriodMillis), Kind: KindRemote, N: n}
	}
	kind := KindRemote
	if n%2 == 1 {
		kind = KindOrder
	}
	return callSpec{Scope: fmt.Sprintf("long-%d", rng.IntN(k.LongScopes)), Long: true, Kind: kind, N: n}
}

// toolName is the tool a kind of call runs under.
func toolName(k Kind) string { return "chaos_" + string(k) }

// args returns the call's JSON arguments.
func (c callSpec) args() json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n":%d}`, c.N))
}

// key returns the call's key in hex, as the executor derives it.
func (c callSpec) key() (string, error) {
	canon, err := keyhash.Canonicalize(c.args(), store.Limits{})
	if err != nil {
		return "", err
	}
	return keyhash.ArgsKey(toolName(c.Kind), canon).String(), nil
}
