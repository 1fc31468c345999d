// Package seal encrypts stored results at rest: a Sealer seals a tool's
// result before a store writes it and opens it when the store reads it
// back, so the database (or a dump, a replica, a backup) holds no tool
// output in clear.
//
// A sealed result is AES-256-GCM (standard library) ciphertext whose
// associated data binds it to its record: the scope, the key, the
// fingerprint of the call and the outcome's kind. A result copied onto
// another record (by SQL, or a restore gone wrong), or whose kind was
// changed, does not open: the store reports *OpenError and never replays
// it. Every sealed result names the key that sealed it (a KeyID), so keys
// rotate: a Sealer opens with any of its keys and seals with its current
// one, and pgstore.Store.Reseal (idemctl reseal) moves old results to the
// current key.
//
// Why AES-256-GCM rather than XChaCha20-Poly1305: it is in the standard
// library (no dependency), it runs on the AES instructions of every server
// CPU, and it is the approved AEAD of Go's FIPS 140-3 module, which teams
// storing payment results are often held to. Its nonces are random 96-bit
// values (cipher.NewGCMWithRandomNonce), which bounds one key to 2^32
// seals; rotate to a new key before then (docs/operations.md says how).
//
// Both stores take a *Sealer in their Config (pgstore.Config.Sealer,
// memstore.Config.Sealer); nil means results are stored as given.
package seal
