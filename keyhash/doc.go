// Package keyhash holds idemstore's frozen, versioned recipe for call keys and
// fingerprints.
//
// Keys are stored durably, so the recipe never changes once released: golden
// vectors in testdata/ pin it. A future recipe gets a new version label and
// the old one keeps working for stored records.
//
// The recipe (version "v1"):
//   - arguments are brought to canonical JSON: object keys sorted by their
//     UTF-8 bytes at every depth, no insignificant white space, one spelling
//     for every string, numbers as exact decimals (1, 1.0 and 1e0 are one
//     value; integers are never rounded through float64); absent arguments,
//     null and {} are one value;
//   - a hash is SHA-256 over labelled, length-prefixed parts with the recipe
//     version inside the hashed bytes, never truncated;
//   - a key derived from an invocation id and a key derived from tool name plus
//     arguments carry different labels, so they can never be equal.
package keyhash
