package httpidem

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"net/http"
	"net/textproto"

	"github.com/idemstore/idemstore/keyhash"
)

// FingerprintVersion labels the request encoding below. It is the "tool"
// part of keyhash.Fingerprint, so a fingerprint of another encoding (or of
// a tool call) can never equal one of these. Stored fingerprints depend on
// it: the encoding never changes under this label.
const FingerprintVersion = "httpidem/request/v1"

// Fingerprint is what a key's stored record is compared with: a request
// with the same key and another fingerprint gets 422.
//
// It is keyhash.Fingerprint(FingerprintVersion, D), where D is the SHA-256
// of the request's canonical encoding: the concatenation of these parts,
// each written as its length in bytes (8 bytes, big-endian) and then its
// bytes:
//
//  1. the method, as sent (methods are case-sensitive);
//  2. the path, escaped as in the request line (url.URL.EscapedPath);
//  3. the raw query, byte for byte, without the '?' (parameter order and
//     escaping count: a client retries the request it sent, not an
//     equivalent one);
//  4. for each name of headers, in the order given (the middleware sorts
//     its configured names): the canonical name
//     (textproto.CanonicalMIMEHeaderKey), then the
//     number of the header's values as a part of 8 bytes, big-endian,
//     then each value in the order received;
//  5. the body, byte for byte.
//
// Length prefixes make the encoding unambiguous: no two different requests
// have the same bytes. The principal is not part of it: it is part of the
// key's scope, so two principals' requests never meet.
//
// The host (r.Host, the Host header) and the scheme are not part of it,
// nor of the scope: a retry may come under another host name (a load
// balancer's, a region's) or with Host rewritten by a proxy, and is the
// same request. So one middleware, or several on one store, serving
// several hosts gives them one key space: the same key and request on two
// hosts replays the first host's response on the second. When their
// clients must not share keys, make the host part of Config.Principal.
//
// A nil r, or an r with a nil URL, has empty parts where it has nothing,
// rather than a panic; the middleware answers such a request 400
// (CodeRequestMalformed) before it fingerprints it.
func Fingerprint(r *http.Request, body []byte, headers []string) keyhash.Sum {
	h := sha256.New()
	var n [8]byte
	part := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	var (
		method, path, query string
		header              http.Header
	)
	if r != nil {
		method, header = r.Method, r.Header
		if r.URL != nil {
			path, query = r.URL.EscapedPath(), r.URL.RawQuery
		}
	}
	partString(h, &n, method)
	partString(h, &n, path)
	partString(h, &n, query)
	for _, name := range headers {
		name = textproto.CanonicalMIMEHeaderKey(name)
		partString(h, &n, name)
		vals := header[name]
		binary.BigEndian.PutUint64(n[:], 8)
		h.Write(n[:])
		binary.BigEndian.PutUint64(n[:], uint64(len(vals)))
		h.Write(n[:])
		for _, v := range vals {
			partString(h, &n, v)
		}
	}
	part(body)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return keyhash.Fingerprint(FingerprintVersion, d[:])
}

// partString writes s as one length-prefixed part without copying it to
// a byte slice.
func partString(h hash.Hash, n *[8]byte, s string) {
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	_, _ = io.WriteString(h, s) // a hash never fails to write
}
