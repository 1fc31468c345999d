package httpidem

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemstore/idemstore/contract"
	"github.com/idemstore/idemstore/store"
)

// Defaults of Config fields left zero.
const (
	// DefaultHeaderName is the request header the key comes from, as the
	// IETF draft names it.
	DefaultHeaderName = "Idempotency-Key"
	// DefaultMaxKeyBytes bounds a key: room for any UUID, ULID or
	// random token a client generates, and short enough that key and
	// principal fit the store's scope limit (256 bytes by default) together.
	DefaultMaxKeyBytes = 128
	// DefaultMaxBodyBytes bounds a request body the middleware reads (it
	// reads the whole body to fingerprint it).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultReplayedHeader marks a replayed response.
	DefaultReplayedHeader = "Idempotent-Replayed"
	// DefaultRetryAfter is the Retry-After of a 409 (a request with the
	// same key in flight) and a 503 (store unavailable): most handlers
	// finish within a second.
	DefaultRetryAfter = time.Second
	// DefaultMaxWait bounds, with WaitForInFlight, how long a request waits
	// for the one in flight before it gets 409 after all.
	DefaultMaxWait = 10 * time.Second
	// DefaultLease is how long a claim stays live without renewal: a
	// crashed server's claim blocks a retry (409) for at most this long.
	// Renewals keep it live while a slow handler runs.
	DefaultLease = 30 * time.Second
	// DefaultKeyTTL is how long a key is remembered after its first use.
	DefaultKeyTTL = store.DefaultScopeTTL
)

// DefaultMethods are the methods whose requests the middleware covers by
// default: the ones that are not idempotent by definition (RFC 9110).
var DefaultMethods = []string{http.MethodPost, http.MethodPatch}

// DefaultFingerprintHeaders are the request headers in the fingerprint by
// default: the media type says how to read the body, so it is part of the
// payload.
var DefaultFingerprintHeaders = []string{"Content-Type"}

// DefaultReplayHeaders is the allow-list of response headers stored and
// replayed by default: the ones that describe the body (so that its bytes
// replay with their meaning and encoding) or the resource created. Headers
// about this one exchange (Date, Set-Cookie, tracing ids, rate limits) are
// left out.
var DefaultReplayHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language",
	"Location", "ETag", "Last-Modified",
}

// framingHeaders describe one message's framing or connection; replaying
// them would corrupt the response.
var framingHeaders = []string{"Content-Length", "Transfer-Encoding", "Connection", "Trailer", "Upgrade", "Keep-Alive"}

// movedHeaders are the request headers net/http's server takes out of
// r.Header (into r.Host, r.TransferEncoding, r.Trailer): read there, they
// are never present.
var movedHeaders = map[string]string{
	"Host":              "net/http moves it to r.Host",
	"Transfer-Encoding": "net/http moves it to r.TransferEncoding",
	"Trailer":           "net/http moves it to r.Trailer",
}

// Config tunes a Middleware. A nil *Config, and every zero field, means the
// defaults.
type Config struct {
	// HeaderName is the request header holding the key. Host,
	// Transfer-Encoding and Trailer are refused: net/http takes them out
	// of a request's header, so the key would never be found. Defaults to
	// DefaultHeaderName.
	HeaderName string
	// MaxKeyBytes bounds the key (its characters after unescaping); a
	// longer key gets 400. Key and principal together must fit the
	// store's Limits.MaxScopeBytes (see Principal). Defaults to
	// DefaultMaxKeyBytes.
	MaxKeyBytes int
	// Methods are the request methods covered; requests with other
	// methods pass through untouched, key or not. Defaults to
	// DefaultMethods (POST and PATCH).
	Methods []string
	// AllowMissingKey lets a covered request without the header pass
	// through without idempotency. By default it gets 400, as the draft
	// says for an operation documented as requiring a key.
	AllowMissingKey bool
	// Principal says whose request it is: the authenticated principal or
	// tenant, as your authentication put it in the request's context.
	// Keys are looked up per principal, so one client's key never answers
	// another client's request. It must be at most the store's
	// MaxScopeBytes - 1 - MaxKeyBytes bytes of valid UTF-8 without NUL;
	// a principal that is not gets 500 (it is a bug of the service, not of
	// the client).
	//
	// Defaults to a function returning "": every client shares one key
	// space. That is safe only when every client is trusted with every
	// other's responses (one client, or services of one owner): otherwise
	// a client that learns or guesses another's key gets the other's
	// response replayed (a leak), and two clients that pick the same key
	// collide (422 or the other's response). Set it in any multi-tenant
	// service. The host is not part of a key's identity either (see
	// Fingerprint): a service whose hosts must not share keys puts the
	// host in the principal. It is asked before the body is read, and
	// must not read r.Body (take the principal from what authentication
	// verified: headers, the context).
	Principal func(r *http.Request) string
	// FingerprintHeaders are the request headers whose values are part of
	// the fingerprint, beside method, path, query and body. A nil slice
	// defaults to DefaultFingerprintHeaders; an empty non-nil slice means
	// none. Host, Transfer-Encoding and Trailer, which net/http takes out
	// of a request's header, are refused (as HeaderName): the host goes in
	// Principal.
	FingerprintHeaders []string
	// ReplayHeaders is the allow-list of response headers stored and
	// replayed. A nil slice defaults to DefaultReplayHeaders; an empty
	// non-nil slice replays no header. Framing headers (Content-Length,
	// Transfer-Encoding, Connection, Trailer, Upgrade, Keep-Alive) are
	// refused.
	ReplayHeaders []string
	// ReplayedHeader is the response header set to "true" on a replay.
	// It may be neither a framing header nor one of ReplayHeaders.
	// Defaults to DefaultReplayedHeader.
	ReplayedHeader string
	// MaxBodyBytes bounds the request body; a longer one gets 413 and
	// nothing is stored. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxResponseBytes bounds the response body stored; a longer response
	// is sent as it is written, and not stored (the claim is released).
	// CommitTx and CompleteTx refuse a longer body with a
	// *contract.LimitError and store nothing.
	// Defaults to, and may not exceed, the store's Limits.MaxResultBytes
	// (the stored status and headers must fit in it too).
	MaxResponseBytes int
	// Store4xx stores a handler's 4xx responses (except 408, 425 and 429,
	// which ask the client to try again) and replays them. By default a
	// 4xx is not stored: it usually means nothing happened, so the retry
	// runs the handler again.
	Store4xx bool
	// WaitForInFlight makes a request whose key is in flight wait for the
	// first request to end and replay its response (or run, if the first
	// one failed), instead of getting 409 at once. The wait is bounded by
	// MaxWait and by the request's context.
	WaitForInFlight bool
	// MaxWait bounds a request's wait with WaitForInFlight; past it the
	// request gets 409. Defaults to DefaultMaxWait.
	MaxWait time.Duration
	// RetryAfter is the Retry-After of 409 and 503 answers, rounded up to
	// whole seconds. Defaults to DefaultRetryAfter.
	RetryAfter time.Duration
	// Lease is how long a claim stays live without renewal. While the
	// handler runs it is renewed every RenewEvery; if the server dies, a
	// retry gets 409 until the lease ends, then runs the handler
	// (RequestInfo.TakenOver tells it). With the default RenewEvery it
	// must be at least 3ns. Defaults to DefaultLease.
	Lease time.Duration
	// RenewEvery is how often a running handler's lease is renewed; it
	// must be shorter than Lease. Defaults to Lease/3.
	RenewEvery time.Duration
	// KeyTTL is how long a key is remembered from its first use: a retry
	// within it replays, one after it runs anew. Each key expires on its
	// own. Defaults to DefaultKeyTTL (24 hours); it must not be shorter
	// than Lease.
	KeyTTL time.Duration
	// Logger receives what a client's answer cannot say: a response that
	// could not be stored, a store failure, a handler that stored one
	// response and sent another. Defaults to a logger that discards.
	Logger *slog.Logger
}

// configName names Config in its errors.
const configName = "httpidem.Config"

// settings is a Config with defaults applied and names canonicalised.
type settings struct {
	header           string // canonical
	maxKey           int
	methods          []string
	allowMissing     bool
	principal        func(*http.Request) string
	maxPrincipal     int
	maxTool          int      // the store's MaxToolBytes
	fpHeaders        []string // canonical, sorted, distinct
	replayHeaders    map[string]bool
	replayedHeader   string // canonical
	maxBody          int64
	maxResponse      int
	maxResult        int // the store's
	store4xx         bool
	wait             bool
	maxWait          time.Duration
	retryAfterHeader string // whole seconds
	retryAfter       time.Duration
	lease            time.Duration
	renewEvery       time.Duration
	keyTTL           time.Duration
	log              *slog.Logger
}

// settle checks c (nil means defaults) against the store's limits and
// returns the settings.
func settle(c *Config, lim store.Limits) (settings, error) {
	var in Config
	if c != nil {
		in = *c
	}
	lim = lim.WithDefaults()
	s := settings{
		header:         orDefault(in.HeaderName, DefaultHeaderName),
		maxKey:         orDefault(in.MaxKeyBytes, DefaultMaxKeyBytes),
		methods:        in.Methods,
		allowMissing:   in.AllowMissingKey,
		principal:      in.Principal,
		replayedHeader: orDefault(in.ReplayedHeader, DefaultReplayedHeader),
		maxBody:        orDefault(in.MaxBodyBytes, DefaultMaxBodyBytes),
		maxResponse:    orDefault(in.MaxResponseBytes, lim.MaxResultBytes),
		maxResult:      lim.MaxResultBytes,
		store4xx:       in.Store4xx,
		wait:           in.WaitForInFlight,
		maxWait:        orDefault(in.MaxWait, DefaultMaxWait),
		retryAfter:     orDefault(in.RetryAfter, DefaultRetryAfter),
		lease:          orDefault(in.Lease, DefaultLease),
		keyTTL:         orDefault(in.KeyTTL, DefaultKeyTTL),
		log:            in.Logger,
	}
	s.renewEvery = orDefault(in.RenewEvery, s.lease/3)
	if s.methods == nil {
		s.methods = DefaultMethods
	}
	if s.principal == nil {
		s.principal = sharedPrincipal
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.retryAfterHeader = fmt.Sprint(int64((s.retryAfter + time.Second - 1) / time.Second))

	if err := checkConfig(in, &s, lim); err != nil {
		return settings{}, err
	}
	if err := contract.CheckLogger(configName, in.Logger); err != nil {
		return settings{}, err
	}
	s.header = textproto.CanonicalMIMEHeaderKey(s.header)
	s.replayedHeader = textproto.CanonicalMIMEHeaderKey(s.replayedHeader)
	fp := in.FingerprintHeaders
	if fp == nil {
		fp = DefaultFingerprintHeaders
	}
	s.fpHeaders = canonicalNames(fp)
	rh := in.ReplayHeaders
	if rh == nil {
		rh = DefaultReplayHeaders
	}
	s.replayHeaders = make(map[string]bool, len(rh))
	for _, name := range canonicalNames(rh) {
		s.replayHeaders[name] = true
	}
	s.maxPrincipal = lim.MaxScopeBytes - 1 - s.maxKey
	s.maxTool = lim.MaxToolBytes
	return s, nil
}

// checkConfig refuses nonsense in the raw config in and its settled form s.
func checkConfig(in Config, s *settings, lim store.Limits) error {
	cfgErr := func(field, problem string) error {
		return &contract.ConfigError{Config: configName, Field: field, Problem: problem}
	}
	if err := contract.CheckConfigDurations(configName,
		contract.Field{Name: "MaxWait", D: in.MaxWait},
		contract.Field{Name: "RetryAfter", D: in.RetryAfter},
		contract.Field{Name: "Lease", D: in.Lease},
		contract.Field{Name: "RenewEvery", D: in.RenewEvery},
		contract.Field{Name: "KeyTTL", D: in.KeyTTL},
	); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxKeyBytes", int64(in.MaxKeyBytes)},
		{"MaxBodyBytes", in.MaxBodyBytes},
		{"MaxResponseBytes", int64(in.MaxResponseBytes)},
	} {
		if f.v < 0 {
			return cfgErr(f.name, "negative")
		}
	}
	switch {
	case s.renewEvery <= 0:
		// Only a default RenewEvery (Lease/3) can be zero: a lease of 1 or
		// 2ns leaves no interval to renew at, and a zero interval would
		// crash the renewal timer.
		// Worded as the executor's refusal of the same lease.
		return cfgErr("Lease", fmt.Sprintf("%s is too short to renew (Lease/3 is 0)", s.lease))
	case s.renewEvery >= s.lease:
		return cfgErr("RenewEvery", fmt.Sprintf("%s is not shorter than the lease (%s)", s.renewEvery, s.lease))
	case s.keyTTL < s.lease:
		// A key forgotten while its request may still run: the response
		// is stored into an expired key, and the client's retry runs the
		// handler again.
		return cfgErr("KeyTTL", fmt.Sprintf("%s is shorter than the lease (%s): a key would be forgotten while its request runs", s.keyTTL, s.lease))
	// Subtracting from the store's limit, not adding to the key's, so that
	// a huge MaxKeyBytes cannot overflow past the check.
	case s.maxKey > lim.MaxScopeBytes-2:
		return cfgErr("MaxKeyBytes", fmt.Sprintf("%d leaves no room for the principal in the store's MaxScopeBytes (%d): raise the store's limit", s.maxKey, lim.MaxScopeBytes))
	case s.maxResponse > lim.MaxResultBytes:
		return cfgErr("MaxResponseBytes", fmt.Sprintf("%d is over the store's MaxResultBytes (%d)", s.maxResponse, lim.MaxResultBytes))
	case len(s.methods) == 0:
		return cfgErr("Methods", "empty: the middleware would cover nothing")
	}
	for _, m := range s.methods {
		if !isToken(m) {
			return cfgErr("Methods", fmt.Sprintf("%s is not a method name", contract.Quote(m)))
		}
		// Methods are case-sensitive (RFC 9110, 9.1): "post" is another
		// method than POST, which no client sends, so the middleware would
		// silently cover nothing of what was meant.
		if std := strings.ToUpper(m); std != m && standardMethods[std] {
			return cfgErr("Methods", fmt.Sprintf("%s is not %s: methods are case-sensitive", contract.Quote(m), std))
		}
	}
	for field, name := range map[string]string{"HeaderName": s.header, "ReplayedHeader": s.replayedHeader} {
		if !isToken(name) {
			return cfgErr(field, fmt.Sprintf("%s is not a header name", contract.Quote(name)))
		}
	}
	for field, names := range map[string][]string{"FingerprintHeaders": in.FingerprintHeaders, "ReplayHeaders": in.ReplayHeaders} {
		for _, name := range names {
			if !isToken(name) {
				return cfgErr(field, fmt.Sprintf("%s is not a header name", contract.Quote(name)))
			}
		}
	}
	// A key read from a header the server never leaves in r.Header is
	// never found: every covered request gets 400, or, under
	// AllowMissingKey, runs with no idempotency at all. In the
	// fingerprint such a header never counts, and Host is the one a
	// service would add there to keep hosts apart: it would not.
	if why, ok := movedHeaders[textproto.CanonicalMIMEHeaderKey(s.header)]; ok {
		return cfgErr("HeaderName", fmt.Sprintf("%s is never in a request's header: %s", contract.Quote(s.header), why))
	}
	for _, name := range in.FingerprintHeaders {
		cn := textproto.CanonicalMIMEHeaderKey(name)
		if why, ok := movedHeaders[cn]; ok {
			problem := fmt.Sprintf("%s is never in a request's header (%s), so it would never count", contract.Quote(name), why)
			if cn == "Host" {
				problem += ": to keep hosts apart, make the host part of Principal"
			}
			return cfgErr("FingerprintHeaders", problem)
		}
	}
	for _, name := range in.ReplayHeaders {
		if slices.Contains(framingHeaders, textproto.CanonicalMIMEHeaderKey(name)) {
			return cfgErr("ReplayHeaders", fmt.Sprintf("%s describes one message's framing and cannot be replayed", contract.Quote(name)))
		}
	}
	// A replay sets ReplayedHeader to "true": on a framing header that
	// corrupts the response, and on a replayed header it overwrites the
	// stored value (Content-Type: true).
	replayed := textproto.CanonicalMIMEHeaderKey(s.replayedHeader)
	if slices.Contains(framingHeaders, replayed) {
		return cfgErr("ReplayedHeader", fmt.Sprintf("%s describes one message's framing", contract.Quote(s.replayedHeader)))
	}
	rh := in.ReplayHeaders
	if rh == nil {
		rh = DefaultReplayHeaders
	}
	for _, name := range rh {
		if textproto.CanonicalMIMEHeaderKey(name) == replayed {
			return cfgErr("ReplayedHeader", fmt.Sprintf("%s is also in ReplayHeaders: a replay would overwrite the stored value", contract.Quote(s.replayedHeader)))
		}
	}
	return nil
}

// sharedPrincipal is the default Principal: one key space for everyone.
func sharedPrincipal(*http.Request) string { return "" }

// canonicalNames returns names in canonical form, sorted, without repeats.
func canonicalNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, textproto.CanonicalMIMEHeaderKey(n))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// isToken reports whether s is an RFC 9110 token: what method and header
// names are made of.
// standardMethods are the methods of net/http's constants, by name.
var standardMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodConnect: true,
	http.MethodOptions: true, http.MethodTrace: true,
}

func isToken[T string | []byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTChar(s[i]) {
			return false
		}
	}
	return true
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// covers reports whether requests with method m are covered.
func (s *settings) covers(m string) bool {
	for _, c := range s.methods {
		if c == m {
			return true
		}
	}
	return false
}

// storable reports whether a response with this status may be stored.
func (s *settings) storable(status int) bool {
	switch {
	case status >= 200 && status < 400:
		return true
	case status >= 400 && status < 500:
		return s.store4xx && status != http.StatusRequestTimeout &&
			status != http.StatusTooEarly && status != http.StatusTooManyRequests
	}
	return false
}

// toolName is the record's tool name, for operators: method and path, cut
// to the store's limit. It is not part of the fingerprint (the method and
// path are, in full).
func toolName(r *http.Request, max int) string {
	name := strings.ToValidUTF8(r.Method+" "+r.URL.EscapedPath(), "?")
	name = strings.ReplaceAll(name, "\x00", "?")
	if len(name) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut]
	}
	if name == "" {
		return "HTTP"
	}
	return name
}
