package mcptools

import (
	"errors"
	"net/url"
	"strings"
)

// withoutURLSecrets returns err with every text of the URL of a *url.Error
// in its chain (what Go's HTTP client fails with, and the SDK's streamable
// HTTP transport wraps) cut to its scheme and host. A server's URL may
// carry a token in its query or path (net/http hides a password only),
// and the error's text becomes a stored record's last error, a log line
// and a span's status. The error still matches what it wrapped.
func withoutURLSecrets(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) || ue.URL == "" {
		return err
	}
	short := "(the server's URL)"
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		short = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	}
	if short == ue.URL {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), ue.URL, short), err: err}
}

// redactedError is an error whose text was cut (withoutURLSecrets).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
