// Package keyhash holds idemstore's frozen, versioned recipe for call keys and
// fingerprints.
//
// Keys are stored durably, so the recipe never changes once released: the
// golden vectors in testdata/golden.json pin every byte of it (TestGoldenVectors;
// its -update flag may add vectors but refuses to change or drop one). A
// future recipe gets a new version label (and its own golden file) and the old
// one keeps working for stored records. This page says enough to reimplement the recipe
// in another language and get the same bytes.
//
// # Recipe version
//
// The version label is [Version], "idemstore/keyhash/v1". It is the first part
// of every hashed input.
//
// # Canonical arguments
//
// [Canonicalize] turns a call's JSON arguments (RFC 8259) into canonical
// bytes. The same JSON value always gives the same bytes and different values
// give different bytes.
//
// Input:
//   - The input must be at most contract.Limits.MaxArgBytes bytes long; a longer input
//     is refused (*contract.LimitError, Limit "MaxArgBytes") before it is parsed.
//   - It must be valid UTF-8 JSON (no byte order mark). White space is the
//     four JSON characters space, tab, line feed, carriage return, and is
//     insignificant.
//   - Absent arguments (an empty input, or only white space), a top-level
//     null and {} are one value, whose canonical form is "{}".
//   - Otherwise the top-level value must be an object: tool arguments are a
//     JSON object. The whole input is parsed first (so its syntax and limit
//     errors come first), then a top-level array, string, number or boolean is
//     refused (*contract.ArgumentsError at offset of the value).
//   - Nesting: the top-level object is depth 1, and each array or object
//     inside adds one. A depth over contract.Limits.MaxDepth is refused
//     (*contract.LimitError, Limit "MaxDepth") when its opening bracket is read.
//   - Anything after the top-level value other than white space is refused.
//
// Output, with no white space anywhere:
//   - Objects: "{" members "}", members separated by ",", each member
//     written as string ":" value. Members are ordered by the UTF-8 bytes of
//     their keys after every escape is decoded (byte-wise lexicographic, a
//     prefix before its extensions; this is also code-point order). Two keys
//     equal after decoding escapes ("a" and "\u0061") are a duplicate, which
//     is refused. The order of keys in the input does not matter at any depth.
//   - Arrays: "[" values separated by "," "]", in input order.
//   - Literals: true, false, null.
//   - Strings: every escape of the input is decoded; the text is then written
//     between double quotes with only these characters escaped: '"' as \",
//     '\' as \\, U+0008 as \b, U+0009 as \t, U+000A as \n, U+000C as \f,
//     U+000D as \r, and the other characters U+0000..U+001F as \u00xx with two
//     lower-case hex digits. Every other character, including '/', U+007F,
//     U+2028 and non-ASCII, is written as raw UTF-8 (the string rule of
//     RFC 8785, section 3.2.2.2). Invalid UTF-8, raw control characters, an
//     unknown escape, and a \u escape of a UTF-16 surrogate that is not a high
//     surrogate directly followed by a \u escape of a low surrogate are
//     refused. A valid escaped surrogate pair stands for one supplementary
//     character (\ud83d\ude00 is written as the four UTF-8 bytes of U+1F600).
//     The strings "NaN" and "Infinity" are ordinary strings; bare NaN is not
//     JSON and is refused.
//   - Numbers are exact decimals, never rounded through a binary float. The
//     input must follow the strict JSON grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?
//     ([eE][+-]?[0-9]+)? (no leading zeros, no '+' sign, no ".5", no "1.").
//     A number is written as "0" when its value is zero (0, -0, 0.0, 0e7),
//     and otherwise as an optional "-", then the significand digits D, then,
//     only if E is not 0, "e" and E in decimal (with "-" if negative, never
//     "+"), where D is an integer without leading or trailing zeros and
//     value = ±D × 10^E. So 1, 1.0, 1e0, 10e-1 and 0.1e1 are all "1"; 10 is
//     "1e1"; 100 is "1e2"; 1.5 is "15e-1"; 0.05 is "5e-2"; 123.45e3 is
//     "12345e1"; and 9007199254740993 (2^53+1) stays "9007199254740993".
//     A non-zero number with |E| > [MaxExponent] (10^18-1) is refused, so
//     1e999999999 is accepted ("1e999999999") and stays short.
//
// Every refused input gives an *contract.ArgumentsError (errors.Is contract.ErrInvalidArguments)
// with the byte offset of the problem, or a *contract.LimitError (errors.Is
// contract.ErrTooLarge). The canonical form is itself valid JSON and canonicalizes to
// itself. It is made to be hashed, not shown: show or log the arguments as
// the model sent them (10 is canonically "1e1").
//
// # Hashes
//
// Every key and fingerprint is SHA-256 over the concatenation of labelled,
// length-prefixed parts: for each part in order, its length in bytes as an
// 8-byte big-endian unsigned integer, then its bytes. The first part is the
// version label, the second a label naming the namespace, then the label's
// fixed list of parts:
//
//	IDKey(id)                   Version, "id-key",      id
//	ArgsKey(tool, canonical)    Version, "args-key",    tool, canonical arguments
//	Fingerprint(tool, canon.)   Version, "fingerprint", tool, canonical arguments
//	DownstreamKey(scope, key)   Version, "downstream",  scope, the 32 key bytes
//
// Length prefixes make every list of parts a different byte string ("ab"+"c"
// and "a"+"bc" differ); the labels keep keys from invocation ids, keys from
// arguments, fingerprints and downstream keys in separate namespaces, so they
// can never be equal without a SHA-256 collision. Digests are never truncated.
// A key or fingerprint is the 32-byte [Sum]; a downstream key is "idem-"
// followed by the 64 lower-case hex digits of its digest.
package keyhash
