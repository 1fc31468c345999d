package seal

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/idemstore/idemstore/contract"
)

// ParseKeys reads keys written as text, for an environment variable or a
// key file: entries ID:KEY separated by commas, spaces or new lines, where
// ID is a key id (1 or more) and KEY is KeySize bytes in base64 (standard
// alphabet, padded or not: what `openssl rand -base64 32` prints). A '#'
// starts a comment that runs to the end of its line. For example
//
//	1:3q2+7w0AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=, 2:q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=
//
// Bad text gives a *contract.InputError naming the entry at fault (by its
// position and id), never the key material.
func ParseKeys(text string) (map[KeyID][]byte, error) {
	bad := func(n int, problem string) error {
		return &contract.InputError{Field: "seal keys", Problem: fmt.Sprintf("entry %d: %s", n, problem)}
	}
	var fields []string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields = append(fields, strings.FieldsFunc(line, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })...)
	}
	if len(fields) == 0 {
		return nil, &contract.InputError{Field: "seal keys", Problem: "empty: want ID:BASE64KEY entries"}
	}
	keys := make(map[KeyID][]byte, len(fields))
	for i, f := range fields {
		n := i + 1
		idText, keyText, ok := strings.Cut(f, ":")
		if !ok {
			return nil, bad(n, "want ID:BASE64KEY")
		}
		id, err := ParseKeyID(idText)
		if err != nil {
			return nil, bad(n, "bad key id "+showID(idText)+": want a whole number from 1 to 4294967295")
		}
		if _, dup := keys[id]; dup {
			return nil, bad(n, fmt.Sprintf("key id %d appears twice", id))
		}
		key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(keyText, "="))
		if err != nil {
			return nil, bad(n, fmt.Sprintf("key id %d: the key is not base64", id))
		}
		if len(key) != KeySize {
			return nil, bad(n, fmt.Sprintf("key id %d: the key has %d bytes, want %d", id, len(key), KeySize))
		}
		keys[id] = key
	}
	return keys, nil
}

// maxShownID is the longest bad key id an error repeats: an id has at most
// 10 digits, and a longer one is likely key material (an entry written
// KEY:ID, a key given as the current key's id), which an error must not
// repeat.
const maxShownID = 12

// showID is a bad key id as an error shows it: quoted when short, else
// only its length.
func showID(text string) string {
	if len(text) > maxShownID {
		return fmt.Sprintf("(%d bytes, not shown: too long for a key id, maybe a key)", len(text))
	}
	return contract.Quote(text)
}

// ParseKeyID reads a key id written in decimal (1 or more). A bad one gives
// a *contract.InputError that repeats it only when it is too short to be
// key material.
func ParseKeyID(text string) (KeyID, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(text), 10, 32)
	if err != nil || n == 0 {
		return 0, &contract.InputError{Field: "key id", Problem: showID(text) + " is not a whole number from 1 to 4294967295"}
	}
	return KeyID(n), nil
}
