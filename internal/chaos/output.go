package chaos

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Kind is the kind of tool a call runs.
type Kind string

// Tool kinds.
const (
	// KindRemote is the remote-like tool: its side effect (a row in
	// chaos_effects) is its own statement, committed before the executor
	// stores the outcome, like a call to a remote API.
	KindRemote Kind = "remote"
	// KindOrder is the transactional example: it inserts an order row and
	// stores the outcome with pgstore.CompleteTx in one transaction.
	KindOrder Kind = "order"
	// KindProbe is the remote-like tool run in probe-then-store mode: its
	// run is a row in chaos_probe_runs, its outcome is stored with Put, and
	// its output names the run (Output.Token is the run's id, not a claim
	// token: that mode makes no claims).
	KindProbe Kind = "probe"
	// KindCharge is the downstream-key example (examples/downstreamkey): a
	// charge through a payments API that deduplicates on the call's
	// downstream key and may lose its responses. Its output is the API's
	// charge, not an Output.
	KindCharge Kind = "charge"
)

func parseKind(s string) (Kind, bool) {
	switch Kind(s) {
	case KindRemote, KindOrder, KindProbe, KindCharge:
		return Kind(s), true
	}
	return "", false
}

// Output is what the chaos tools return, and so what is stored and
// replayed (all but KindCharge, whose output is the payments API's). It
// names its producer (the claim's token; for KindProbe the run's id), so
// that a stored outcome whose producer is not the record's token holder is
// seen.
type Output struct {
	Kind        Kind
	Token       int64
	Scope       string
	Key         string // hex
	Attempt     int
	Incarnation int
}

const outputPrefix = "chaos/v1"

// Encode returns the output bytes.
func (o Output) Encode() []byte {
	return fmt.Appendf(nil, "%s kind=%s token=%d scope=%s key=%s attempt=%d inc=%d",
		outputPrefix, o.Kind, o.Token, o.Scope, o.Key, o.Attempt, o.Incarnation)
}

// DecodeOutput parses bytes made by Encode.
func DecodeOutput(b []byte) (Output, error) {
	fields := strings.Fields(string(b))
	if len(fields) != 7 || fields[0] != outputPrefix {
		return Output{}, fmt.Errorf("chaos: not a chaos output: %q", b)
	}
	var o Output
	for _, f := range fields[1:] {
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			return Output{}, fmt.Errorf("chaos: output field %q", f)
		}
		var err error
		switch name {
		case "kind":
			var ok bool
			if o.Kind, ok = parseKind(value); !ok {
				err = fmt.Errorf("unknown kind")
			}
		case "token":
			o.Token, err = strconv.ParseInt(value, 10, 64)
		case "scope":
			o.Scope = value
		case "key":
			o.Key = value
		case "attempt":
			o.Attempt, err = strconv.Atoi(value)
		case "inc":
			o.Incarnation, err = strconv.Atoi(value)
		default:
			err = fmt.Errorf("unknown field")
		}
		if err != nil {
			return Output{}, fmt.Errorf("chaos: output field %q: %v", f, err)
		}
	}
	if !bytes.Equal(o.Encode(), b) {
		return Output{}, fmt.Errorf("chaos: output %q is not in canonical form", b)
	}
	return o, nil
}
