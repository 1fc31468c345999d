package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/memstore"
	"github.com/idemstore/idemstore/store/memstore/memstoretest"
)

// A call claimed and completed once is replayed on the retry, byte for byte.
func ExampleNew() {
	s, err := memstore.New(nil) // the defaults: system clock, 24h scopes, bounded memory
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	args := []byte(`{"to":"ada@example.com"}`)
	e := store.Entry{
		Key:         keyhash.ArgsKey("send_mail", args),
		Fingerprint: keyhash.Fingerprint("send_mail", args),
		Tool:        "send_mail",
	}

	res, _ := s.Claim(ctx, "run-42", e, time.Minute, store.WriteOptions{})
	fmt.Println("first call:", res.State == store.ClaimGranted)
	_, _ = s.Complete(ctx, res.Claim, store.Outcome{Kind: store.KindSuccess, Result: []byte("queued as 7")})

	res, _ = s.Claim(ctx, "run-42", e, time.Minute, store.WriteOptions{})
	fmt.Printf("retry: completed=%v result=%q\n", res.State == store.ClaimCompleted, res.Record.Outcome.Result)
	// Output:
	// first call: true
	// retry: completed=true result="queued as 7"
}

// A ManualClock drives scope expiry without sleeping.
func ExampleManualClock() {
	clock := memstoretest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s, _ := memstore.New(&memstore.Config{Clock: clock, DefaultScopeTTL: time.Hour})
	ctx := context.Background()
	e := store.Entry{Key: keyhash.IDKey("call-1"), Fingerprint: keyhash.Fingerprint("t", nil), Tool: "t"}
	_, _, _ = s.Put(ctx, "run", e, store.Outcome{Kind: store.KindSuccess, Result: []byte("ok")}, store.WriteOptions{})

	_, err := s.Get(ctx, "run", e.Key)
	fmt.Println("before expiry:", err)
	clock.Advance(time.Hour)
	_, err = s.Get(ctx, "run", e.Key)
	fmt.Println("after expiry:", err)
	// Output:
	// before expiry: <nil>
	// after expiry: idemstore: not found
}
