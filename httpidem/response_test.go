package httpidem_test

import (
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/httpidem"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

func TestResponseEncodingRoundTrips(t *testing.T) {
	t.Parallel()
	r := httpidem.Response{
		Status: http.StatusCreated,
		Header: http.Header{"Location": {"/orders/7"}, "content-type": {"application/json"}, "Link": {"<a>", "<b>"}},
		Body:   []byte(`{"order_id":7}`),
	}
	b, err := r.Encode()
	require.NoError(t, err)
	got, err := httpidem.DecodeResponse(b)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, got.Status)
	require.Equal(t, r.Body, got.Body)
	require.Equal(t, http.Header{"Location": {"/orders/7"}, "Content-Type": {"application/json"}, "Link": {"<a>", "<b>"}}, got.Header, "names canonical, values in order")
}

// The encoding is stored: these bytes may never change under version 1.
func TestResponseEncodingIsFrozen(t *testing.T) {
	t.Parallel()
	b, err := httpidem.Response{Status: 201, Header: http.Header{"Location": {"/o/1"}, "Content-Type": {"a/b"}}, Body: []byte("hi")}.Encode()
	require.NoError(t, err)
	require.Equal(t,
		"01"+"00c9"+"02"+
			"0c"+hex.EncodeToString([]byte("Content-Type"))+"03"+hex.EncodeToString([]byte("a/b"))+
			"08"+hex.EncodeToString([]byte("Location"))+"04"+hex.EncodeToString([]byte("/o/1"))+
			hex.EncodeToString([]byte("hi")),
		hex.EncodeToString(b))
}

func TestDecodeResponseRefusesWhatEncodeNeverWrote(t *testing.T) {
	t.Parallel()
	for name, b := range map[string][]byte{
		"empty":           nil,
		"short":           {1, 0},
		"version 2":       {2, 0, 200, 0},
		"status 42":       {1, 0, 42, 0},
		"no header count": {1, 0, 200},
		"header too long": {1, 0, 200, 1, 5, 'a'},
		"name not token":  {1, 0, 200, 1, 2, 'a', ' ', 0},
		"CR in value":     {1, 0, 200, 1, 1, 'a', 2, '\r', '\n'},
		"huge count":      {1, 0, 200, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		_, err := httpidem.DecodeResponse(b)
		var ee *httpidem.EncodingError
		require.ErrorAs(t, err, &ee, name)
	}
	_, err := httpidem.Response{Status: 42}.Encode()
	require.Error(t, err)
}

func TestDecodeResponseNeverPanics(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOf(rapid.Byte()).Draw(t, "b")
		_, _ = httpidem.DecodeResponse(b)
	})
}

func TestResponseWriteSendsIt(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	w.Header().Set("Location", "old")
	require.NoError(t, httpidem.Response{Status: 201, Header: http.Header{"location": {"/new"}}, Body: []byte("x")}.Write(w))
	require.Equal(t, 201, w.Code)
	require.Equal(t, []string{"/new"}, w.Header().Values("Location"))
	require.Equal(t, "x", w.Body.String())
}

// The fingerprint is stored beside every record: a request must keep the
// fingerprint it had when its key was first used, across releases. The
// expected value was computed from the recipe in Fingerprint's doc by a
// separate implementation (Python hashlib), not by this code.
func TestFingerprintIsFrozen(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/orders/a%2Fb?x=1&y=%20", nil)
	r.Header.Add("Content-Type", "application/json")
	r.Header.Add("X-Tenant", "t1")
	r.Header.Add("X-Tenant", "t2")
	got := httpidem.Fingerprint(r, []byte(`{"item":"book"}`), []string{"Content-Type", "x-tenant", "X-Absent"})
	require.Equal(t, "93666a692897bb89baf00f0ea696208e78262aa23af14c9860b2ab89deefeef9", got.String())
}

func TestFingerprintTellsRequestsApart(t *testing.T) {
	t.Parallel()
	at := func(target string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, target, nil)
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	base := func() *http.Request { return at("/a?q=1") }
	fp := func(r *http.Request, body string) string {
		return httpidem.Fingerprint(r, []byte(body), []string{"Content-Type", "X-A"}).String()
	}
	seen := map[string]string{fp(base(), "{}"): "base"}
	for name, f := range map[string]func() (*http.Request, string){
		"method":       func() (*http.Request, string) { r := base(); r.Method = http.MethodPatch; return r, "{}" },
		"path":         func() (*http.Request, string) { return at("/b?q=1"), "{}" },
		"escaped path": func() (*http.Request, string) { return at("/%61?q=1"), "{}" },
		"query":        func() (*http.Request, string) { return at("/a?q=2"), "{}" },
		"body":         func() (*http.Request, string) { return base(), "{ }" },
		"header value": func() (*http.Request, string) {
			r := base()
			r.Header.Set("Content-Type", "text/plain")
			return r, "{}"
		},
		"header added":  func() (*http.Request, string) { r := base(); r.Header.Set("X-A", ""); return r, "{}" },
		"query to body": func() (*http.Request, string) { return at("/a?"), "q=1{}" },
	} {
		r, body := f()
		got := fp(r, body)
		require.NotContains(t, seen, got, "%s fingerprints like %s", name, seen[got])
		seen[got] = name
	}
	require.Equal(t, fp(base(), "{}"), fp(base(), "{}"), "deterministic")
}

func TestEncodeRefusesWhatNoReplayCouldDecode(t *testing.T) {
	t.Parallel()
	many := make([]string, 1<<12+1)
	for name, h := range map[string]http.Header{
		"a line break":     {"Location": {"/a\r\nX-Evil: 1"}},
		"a NUL":            {"Content-Type": {"a\x00b"}},
		"not a token":      {"Bad Name": {"v"}},
		"too many headers": {"Link": many},
	} {
		b, err := httpidem.Response{Status: http.StatusCreated, Header: h}.Encode()
		var ee *httpidem.EncodingError
		require.ErrorAs(t, err, &ee, "%s: stored, it failed every replay with 500", name)
		require.Nil(t, b, name)
	}
}

func TestAResponseHeaderWithALineBreakIsStoredAsSentAndReplays(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *backend) {
		var runs atomic.Int64
		srv := serve(t, newMiddleware(t, b.st, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.Header().Set("Location", "/orders/1\r\nX-Evil: 1") // net/http sends the line breaks as spaces
			w.WriteHeader(http.StatusCreated)
		}))
		first := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		require.Equal(t, http.StatusCreated, first.Status)
		again := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
		require.Equal(t, http.StatusCreated, again.Status, "the record is not one every retry fails to replay (500): %s", again.Body)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
		require.Equal(t, int64(1), runs.Load())
	})
}

// A 1xx is no response a replay can send: net/http writes it as an interim
// response and then an empty 200 of its own. Encode refuses it (an operator
// encoding a response by hand to settle a stuck request), a record holding
// one gets 500 instead of that empty 200, and Write refuses it, and a zero
// status, instead of panicking or sending the 200.
func TestAnInformationalOrZeroStatusIsNeverStoredReplayedOrWritten(t *testing.T) {
	t.Parallel()
	for _, code := range []int{0, 100, 101, 103, 199, 1000, -1} {
		b, err := httpidem.Response{Status: code, Body: []byte("x")}.Encode()
		var ee *httpidem.EncodingError
		require.ErrorAs(t, err, &ee, "status %d", code)
		require.Nil(t, b)

		w := httptest.NewRecorder()
		require.ErrorAs(t, httpidem.Response{Status: code, Body: []byte("x")}.Write(w), &ee, "status %d", code)
		require.False(t, w.Flushed)
		require.Empty(t, w.Body.String(), "status %d: nothing written", code)
	}

	st := newMemStore(t)
	req, err := http.NewRequest(http.MethodPost, "http://x/orders", nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	ent := store.Entry{Key: keyhash.IDKey("k"), Fingerprint: httpidem.Fingerprint(req, []byte(`{}`), httpidem.DefaultFingerprintHeaders), Tool: "POST /orders"}
	stored := []byte{1, 0, 103, 0, 'x'} // version 1, status 103, no header, body "x"
	_, _, err = st.Put(testContext(t), httpidem.Scope("", "k"), ent, store.Outcome{Kind: store.KindSuccess, Result: stored}, store.WriteOptions{})
	require.NoError(t, err)
	h := &orders{}
	srv := serve(t, newMiddleware(t, st, nil), h)
	a := send(t, srv, http.MethodPost, "/orders", sfKey("k"), `{}`)
	require.Equal(t, http.StatusInternalServerError, a.Status, "never an empty 200 the handler did not answer")
	require.Equal(t, httpidem.CodeInternal, problemOf(t, a).Code)
	require.Zero(t, h.runs.Load())
}

// A Response built by hand (an operator's, for store.Inspector.ResolveStore)
// may spell one header name twice ("content-type" and "Content-Type"): it
// is one header, so it has one encoding, sorted by canonical name, and a
// replay sends every value, in the byte order of the spellings as net/http
// would send them. Encode wrote each spelling's lines apart, and a replay
// kept only the last spelling's values.
func TestAHeaderSpelledTwiceIsOneHeaderEncodedWrittenAndReplayed(t *testing.T) {
	t.Parallel()
	twice := httpidem.Response{Status: http.StatusCreated, Header: http.Header{
		"content-type": {"a/a"}, "Location": {"/o/1"}, "Content-Type": {"b/b"},
	}, Body: []byte("hi")}
	once := httpidem.Response{Status: http.StatusCreated, Header: http.Header{
		"Content-Type": {"b/b", "a/a"}, "Location": {"/o/1"},
	}, Body: []byte("hi")}
	want, err := once.Encode()
	require.NoError(t, err)
	got, err := twice.Encode()
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got), "one header, one encoding")

	w := httptest.NewRecorder()
	require.NoError(t, twice.Write(w))
	require.Equal(t, []string{"b/b", "a/a"}, w.Header().Values("Content-Type"))

	st := newMemStore(t)
	m := newMiddleware(t, st, nil)
	ctx := testContext(t)
	const key = "two-spellings"
	req := httptest.NewRequest(http.MethodPost, "/orders", nil)
	ent := store.Entry{Key: keyhash.IDKey(key), Tool: "POST /orders", Fingerprint: httpidem.Fingerprint(req, nil, httpidem.DefaultFingerprintHeaders)}
	cr, err := st.Claim(ctx, httpidem.Scope("", key), ent, time.Minute, store.WriteOptions{})
	require.NoError(t, err)
	_, err = st.Complete(ctx, cr.Claim, store.Outcome{Kind: store.KindSuccess, Result: got})
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", sfKey(key))
	rw := httptest.NewRecorder()
	m.Wrap(http.NotFoundHandler()).ServeHTTP(rw, req)
	require.Equal(t, http.StatusCreated, rw.Code)
	require.Equal(t, "true", rw.Header().Get(httpidem.DefaultReplayedHeader))
	require.Equal(t, []string{"b/b", "a/a"}, rw.Header().Values("Content-Type"), "every value replayed")
}

// Response.Write refuses what it cannot send with an error and writes
// nothing (an invalid status); a nil writer, also a typed nil, was no
// different, but it panicked on its first use.
func TestResponseWriteRefusesANilWriterWithATypedError(t *testing.T) {
	t.Parallel()
	var typed *httptest.ResponseRecorder
	for name, w := range map[string]http.ResponseWriter{"nil": nil, "typed nil": typed} {
		var err error
		require.NotPanics(t, func() { err = httpidem.Response{Status: http.StatusCreated, Body: []byte("x")}.Write(w) }, name)
		var ie *contract.InputError
		require.ErrorAs(t, err, &ie, name)
		require.Equal(t, "w", ie.Field, name)
	}
}
