package httpidem

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/internal/nilness"
)

// Response is a stored response: what a replay sends. Its encoding is the
// store.Outcome's Result of a key's record (see Encode).
type Response struct {
	Status int
	// Header holds the allow-listed headers (Config.ReplayHeaders) only.
	Header http.Header
	Body   []byte
}

// Write sends r to w: its headers (replacing any of the same name; the
// values of several spellings of one name, such as "content-type" and
// "Content-Type", go out together, in the byte order of the spellings), its
// status and its body. A handler that stored r with CommitTx sends it so.
// A Status that is not a final status code (200-999; a zero Response's is
// 0) is refused with an *EncodingError and nothing is written: net/http
// would panic on it, or send a 1xx as an interim response followed by an
// empty 200. A nil w (also a typed nil) is refused with a
// *contract.InputError.
func (r Response) Write(w http.ResponseWriter) error {
	if nilness.IsNil(w) {
		return &contract.InputError{Field: "w", Problem: "nil"}
	}
	if err := checkStatus(r.Status); err != nil {
		return err
	}
	h := w.Header()
	names, header := canonicalHeader(r.Header)
	for _, name := range names {
		h[name] = append([]string(nil), header[name]...)
	}
	w.WriteHeader(r.Status)
	if len(r.Body) == 0 {
		return nil
	}
	_, err := w.Write(r.Body)
	return err
}

// responseVersion is the first byte of every encoded Response. A decoder
// refuses any other, so a future encoding gets a new version and old
// records stay readable by the code that wrote them.
const responseVersion = 1

// maxHeaderCount bounds the headers a stored response may carry, so a
// corrupt record cannot make the decoder allocate without bound.
const maxHeaderCount = 1 << 12

// EncodingError says why bytes are not an encoded Response (a record
// corrupted, or written by another program into the key's scope), or why
// a Response cannot be encoded or written (a status no replay can send, a
// header no replay could decode).
type EncodingError struct {
	Problem string
	Offset  int // byte offset where it was found
}

func (e *EncodingError) Error() string {
	return fmt.Sprintf("httpidem: stored response: %s at byte %d", e.Problem, e.Offset)
}

// Encode returns the stored form of r: a small versioned binary envelope.
//
//	version   1 byte, 1
//	status    2 bytes, big-endian
//	count     uvarint, the number of header lines
//	per line  uvarint length + canonical name, uvarint length + value
//	body      the rest, byte for byte
//
// Header names are written in canonical form, sorted, each value a line of
// its own in the order of r.Header, so one response always has one
// encoding; several spellings of one name are one header (see Write). The
// body is last, so a replay takes it from the stored bytes without copying.
// Operators may Encode a response by hand to settle a
// stuck request (store.Inspector.ResolveStore).
func (r Response) Encode() ([]byte, error) {
	if err := checkStatus(r.Status); err != nil {
		return nil, err
	}
	names, header := canonicalHeader(r.Header)
	size := 1 + 2 + binary.MaxVarintLen64 + len(r.Body)
	lines := 0
	for _, name := range names {
		for _, v := range header[name] {
			size += 2*binary.MaxVarintLen64 + len(name) + len(v)
			lines++
		}
	}
	// What DecodeResponse would refuse is refused here, so that no record
	// is stored that every retry fails to replay.
	if lines > maxHeaderCount {
		return nil, &EncodingError{Problem: fmt.Sprintf("%d header lines, over the limit of %d", lines, maxHeaderCount), Offset: 3}
	}
	b := make([]byte, 0, size)
	b = append(b, responseVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Status))
	b = binary.AppendUvarint(b, uint64(lines))
	for _, cn := range names {
		if !isToken(cn) {
			return nil, &EncodingError{Problem: fmt.Sprintf("header name %s is not a token", contract.Quote(cn)), Offset: len(b)}
		}
		for _, v := range header[cn] {
			if !validHeaderValue([]byte(v)) {
				return nil, &EncodingError{Problem: fmt.Sprintf("a value of header %s holds a control character", cn), Offset: len(b)}
			}
			b = binary.AppendUvarint(b, uint64(len(cn)))
			b = append(b, cn...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, r.Body...), nil
}

// canonicalHeader returns h's names in canonical form, sorted, and h with
// its names so. Several spellings of one name ("content-type" and
// "Content-Type") are one header: their values are joined in the byte order
// of the spellings, as net/http writes a map's lines. A header whose names
// are all canonical (every one the middleware stores) is returned as it is.
func canonicalHeader(h http.Header) ([]string, http.Header) {
	names := make([]string, 0, len(h))
	canonical := true
	for name := range h {
		if textproto.CanonicalMIMEHeaderKey(name) != name {
			canonical = false
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if canonical {
		return names, h
	}
	out := make(http.Header, len(h))
	merged := names[:0]
	for _, name := range slices.Clone(names) {
		cn := textproto.CanonicalMIMEHeaderKey(name)
		if _, seen := out[cn]; !seen {
			merged = append(merged, cn)
		}
		out[cn] = append(out[cn], h[name]...)
	}
	slices.Sort(merged)
	return merged, out
}

// DecodeResponse decodes what Encode wrote. The returned Body shares b's
// memory; do not modify it (a store may hand out its stored bytes).
func DecodeResponse(b []byte) (Response, error) {
	var r Response
	err := decodeResponse(b, func(status int) { r.Status = status }, func(name, value string) {
		if r.Header == nil {
			r.Header = make(http.Header)
		}
		r.Header[name] = append(r.Header[name], value)
	}, func(body []byte) { r.Body = body })
	if err != nil {
		return Response{}, err
	}
	return r, nil
}

// decodeResponse walks an encoded response, handing its parts to the
// callbacks, so a replay writes headers straight into the ResponseWriter.
// The whole envelope is checked before the first callback runs: a corrupt
// record never leaves half its headers behind.
func decodeResponse(b []byte, status func(int), header func(name, value string), body func([]byte)) error {
	if len(b) < 3 {
		return &EncodingError{Problem: "shorter than its fixed fields", Offset: len(b)}
	}
	if b[0] != responseVersion {
		return &EncodingError{Problem: fmt.Sprintf("unknown version %d", b[0]), Offset: 0}
	}
	code := int(binary.BigEndian.Uint16(b[1:3]))
	if err := checkStatus(code); err != nil {
		return err
	}
	lines, end, err := checkHeaders(b, 3)
	if err != nil {
		return err
	}
	status(code)
	pos := 3
	_, n := binary.Uvarint(b[pos:])
	pos += n
	for range lines {
		name, next := field(b, pos)
		value, next := field(b, next)
		header(string(name), string(value))
		pos = next
	}
	body(b[end:])
	return nil
}

// checkStatus refuses a status a replay cannot send as the response: one
// that is not three digits (net/http panics on it), or an informational
// 1xx, which net/http sends as an interim response before an empty 200 of
// its own.
func checkStatus(code int) error {
	if code < 200 || code > 999 {
		return &EncodingError{Problem: fmt.Sprintf("status %d is not a final status code (200-999)", code), Offset: 1}
	}
	return nil
}

// checkHeaders checks the header lines starting at pos and returns their
// count and where the body starts.
func checkHeaders(b []byte, pos int) (lines uint64, end int, err error) {
	lines, n := binary.Uvarint(b[pos:])
	if n <= 0 || lines > maxHeaderCount {
		return 0, 0, &EncodingError{Problem: "bad header count", Offset: pos}
	}
	pos += n
	for range lines {
		for part := range 2 {
			l, n := binary.Uvarint(b[pos:])
			if n <= 0 || l > uint64(len(b)-pos-n) {
				return 0, 0, &EncodingError{Problem: "a header line runs past the end", Offset: pos}
			}
			v := b[pos+n : pos+n+int(l)]
			if part == 0 && !isToken(v) {
				return 0, 0, &EncodingError{Problem: "a header name is not a token", Offset: pos + n}
			}
			if part == 1 && !validHeaderValue(v) {
				return 0, 0, &EncodingError{Problem: "a header value holds a control character", Offset: pos + n}
			}
			pos += n + int(l)
		}
	}
	return lines, pos, nil
}

// validHeaderValue refuses the bytes that would break a header line:
// control characters other than horizontal tab (RFC 9110, section 5.5).
func validHeaderValue(v []byte) bool {
	for _, c := range v {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// field returns the length-prefixed field at pos, checked by checkHeaders,
// and the position after it.
func field(b []byte, pos int) ([]byte, int) {
	l, n := binary.Uvarint(b[pos:])
	start := pos + n
	return b[start : start+int(l)], start + int(l)
}
