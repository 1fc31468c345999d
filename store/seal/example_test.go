package seal_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
	"github.com/idemstore/idemstore/store/seal"
)

// A Sealer from keys as an environment variable holds them (see ParseKeys);
// a result sealed for one record does not open for another.
func Example() {
	// In a service: seal.ParseKeys(os.Getenv("IDEMSTORE_SEAL_KEYS")).
	keys := map[seal.KeyID][]byte{1: bytes.Repeat([]byte{0x42}, seal.KeySize)}
	sealer, err := seal.New(seal.Config{Current: 1, Keys: keys})
	if err != nil {
		fmt.Println(err)
		return
	}
	mail := seal.Binding{
		Scope:       "run-7f3a",
		Key:         keyhash.IDKey("call-1"),
		Fingerprint: keyhash.Fingerprint("send_mail", []byte(`{"to":"ada@example.com"}`)),
		Kind:        store.KindSuccess,
	}
	sealed, _ := sealer.Seal(nil, mail, []byte(`{"sent":true}`))
	fmt.Println(len(sealed) - len(`{"sent":true}`))

	plain, _ := sealer.Open(nil, mail, sealed)
	fmt.Println(string(plain))

	other := mail
	other.Scope = "run-9b21"
	_, err = sealer.Open(nil, other, sealed)
	fmt.Println(errors.Is(err, seal.ErrSealed))
	fmt.Println(sealer)
	// Output:
	// 32
	// {"sent":true}
	// true
	// seal.Sealer(current key 1; keys 1)
}
