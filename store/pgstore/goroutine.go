package pgstore

import (
	"bytes"
	"runtime"
	"strconv"
)

// goroutineID returns the id of the calling goroutine, or 0 if it cannot
// be read. Go gives goroutines no identity on purpose; the Cleaner needs
// one in a single place: to tell a Stop called from OnRemoved, on the
// cleaner's own goroutine (which must not wait for itself), from a Stop on
// any other goroutine (which must). The id is read from the first line of
// the goroutine's stack trace, "goroutine 18 [running]:", as
// golang.org/x/net/http2 does for its debug checks. Stop is rare, so the
// cost (a stack header) does not matter; a format that ever failed to
// parse gives 0, which only makes a Stop from OnRemoved wait as before.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if !ok {
		return 0
	}
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return 0
	}
	id, err := strconv.ParseUint(string(b[:i]), 10, 64)
	if err != nil {
		return 0
	}
	return id
}
