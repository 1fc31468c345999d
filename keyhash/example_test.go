package keyhash_test

import (
	"errors"
	"fmt"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/keyhash"
)

// Two spellings of one call give one key.
func ExampleCanonicalize() {
	var lim contract.Limits // zero means the defaults
	a, _ := keyhash.Canonicalize([]byte(`{"to": "ada@example.com", "retries": 1.0, "cc": []}`), lim)
	b, _ := keyhash.Canonicalize([]byte(`{"cc":[],"retries":1e0,"\u0074o":"ada@example.com"}`), lim)
	fmt.Println(string(a))
	fmt.Println(keyhash.ArgsKey("send_mail", a) == keyhash.ArgsKey("send_mail", b))
	// Output:
	// {"cc":[],"retries":1,"to":"ada@example.com"}
	// true
}

// Numbers are exact decimals with one spelling.
func ExampleCanonicalize_numbers() {
	out, _ := keyhash.Canonicalize([]byte(`{"a":10,"b":1.50,"c":-0,"d":9007199254740993,"e":2.5e-3}`), contract.Limits{})
	fmt.Println(string(out))
	// Output:
	// {"a":1e1,"b":15e-1,"c":0,"d":9007199254740993,"e":25e-4}
}

// Bad arguments give typed errors that say what and where.
func ExampleCanonicalize_errors() {
	_, err := keyhash.Canonicalize([]byte(`{"a":1,"a":2}`), contract.Limits{})
	var ae *contract.ArgumentsError
	fmt.Println(errors.As(err, &ae), errors.Is(err, contract.ErrInvalidArguments), ae.Offset)
	fmt.Println(err)

	_, err = keyhash.Canonicalize([]byte(`{"a":[[[]]]}`), contract.Limits{MaxDepth: 3})
	fmt.Println(errors.Is(err, contract.ErrTooLarge), err)
	// Output:
	// true true 7
	// idemstore: invalid arguments: duplicate object key "a" at byte 7
	// true idemstore: too large: nesting depth is 4, limit MaxDepth is 3
}

// A call with an invocation id is keyed by the id alone; its fingerprint
// still records what it asked for.
func ExampleIDKey() {
	canon, _ := keyhash.Canonicalize([]byte(`{"to":"ada@example.com"}`), contract.Limits{})
	key := keyhash.IDKey("call-1")
	fmt.Println(key == keyhash.ArgsKey("send_mail", canon))
	fmt.Println(keyhash.DownstreamKey("run-1", key) == keyhash.DownstreamKey("run-2", key))
	// Output:
	// false
	// false
}

// An executor derives a call's key and fingerprint in one step; they are
// those of its canonical arguments.
func ExampleKeys() {
	args := []byte(`{"to": "ada@example.com", "cc": []}`)
	key, fp, err := keyhash.Keys("send_mail", "", args, contract.Limits{})
	canon, _ := keyhash.Canonicalize(args, contract.Limits{})
	fmt.Println(err, key == keyhash.ArgsKey("send_mail", canon), fp == keyhash.Fingerprint("send_mail", canon))

	// With an invocation id the key is the id's; the fingerprint is the same.
	idKey, idFP, _ := keyhash.Keys("send_mail", "call-1", args, contract.Limits{})
	fmt.Println(idKey == keyhash.IDKey("call-1"), idFP == fp)
	// Output:
	// <nil> true true
	// true true
}
