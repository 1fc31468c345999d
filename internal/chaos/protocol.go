package chaos

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A worker tells the supervisor what happened by lines on its stdout. Each
// line is one write(2) of less than PIPE_BUF bytes, so it reaches the pipe
// whole even when the worker is killed right after.
//
//	READY <inc>                                             store open, calls begin
//	START <inc> <seq> <kind> <scope> <long> <n>             a call begins
//	ACK <inc> <seq> <kind> <scope> <key> <replayed> <at> <out>
//	                                                        Execute succeeded (at: the wall clock when it
//	                                                        returned, in Unix nanoseconds; out in hex)
//	ERR <inc> <seq> <class> <message>                       Execute failed
//	KILL <inc> <point> <scope> <key> <token>                about to SIGKILL itself
//
// An ACK is written only after Execute returned success: it is the
// acknowledgement the contract says must never be lost. Its time is read
// from the machine's wall clock, which every process of the suite shares:
// an outcome acknowledged at that time was stored before it. The calls a killed
// worker started and never ended are handed to the next worker, which
// retries them first, as an agent runtime retries after a crash.
const (
	lineReady = "READY"
	lineStart = "START"
	lineAck   = "ACK"
	lineErr   = "ERR"
	lineKill  = "KILL"
)

// Ack is an acknowledged call.
type Ack struct {
	Incarnation int
	Kind        Kind
	Scope       string
	Key         string // hex
	Replayed    bool
	// At is when Execute returned, by the machine's wall clock: the outcome
	// was stored (or found stored) before.
	At     time.Time
	Output []byte
}

// Kill is a worker's announcement that it kills itself at a fail point.
type Kill struct {
	Incarnation int
	Point       FailPoint
	Scope       string
	Key         string // hex; "-" when unknown
	Token       int64  // 0 before a claim
}

// callError is a failed call as a worker reported it.
type callError struct {
	Incarnation int
	Class       errorClass
	Message     string
}

// started is a call a worker began.
type started struct {
	Seq  int64
	Call callSpec
}

// message is one parsed line; exactly one field is set, and seq for the
// lines that end a call.
type message struct {
	ready *int
	start *started
	ack   *Ack
	err   *callError
	kill  *Kill
	seq   int64
}

// lineWriter writes protocol lines, one write per line, from many
// goroutines.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	inc int
}

func (lw *lineWriter) line(format string, args ...any) {
	b := fmt.Appendf(nil, format, args...)
	b = append(b, '\n')
	lw.mu.Lock()
	defer lw.mu.Unlock()
	// A failed write means the supervisor is gone; the worker will be
	// stopped by its stdin closing.
	_, _ = lw.w.Write(b)
}

func (lw *lineWriter) ready() { lw.line("%s %d", lineReady, lw.inc) }

func (lw *lineWriter) start(seq int64, c callSpec) {
	lw.line("%s %d %d %s %s %d %d", lineStart, lw.inc, seq, c.Kind, c.Scope, bit(c.Long), c.N)
}

func (lw *lineWriter) ack(seq int64, kind Kind, scope, key string, replayed bool, at time.Time, out []byte) {
	lw.line("%s %d %d %s %s %s %d %d %s", lineAck, lw.inc, seq, kind, scope, key, bit(replayed), at.UnixNano(), hex.EncodeToString(out))
}

func (lw *lineWriter) fail(seq int64, class errorClass, msg string) {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 300 {
		msg = msg[:300]
	}
	lw.line("%s %d %d %s %s", lineErr, lw.inc, seq, class, msg)
}

func bit(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (lw *lineWriter) kill(p FailPoint, scope, key string, token int64) {
	if scope == "" {
		scope = "-"
	}
	if key == "" {
		key = "-"
	}
	lw.line("%s %d %s %s %s %d", lineKill, lw.inc, p, scope, key, token)
}

// parseLine parses one line of a worker's stdout.
func parseLine(s string) (message, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return message{}, fmt.Errorf("chaos: worker line %q", s)
	}
	inc, err := strconv.Atoi(f[1])
	if err != nil {
		return message{}, fmt.Errorf("chaos: worker line %q: incarnation: %v", s, err)
	}
	bad := func(why string) (message, error) {
		return message{}, fmt.Errorf("chaos: worker line %q: %s", s, why)
	}
	switch f[0] {
	case lineReady:
		if len(f) != 2 {
			return bad("fields")
		}
		return message{ready: &inc}, nil
	case lineStart:
		if len(f) != 7 {
			return bad("fields")
		}
		seq, err1 := strconv.ParseInt(f[2], 10, 64)
		kind, ok := parseKind(f[3])
		n, err2 := strconv.ParseInt(f[6], 10, 64)
		if err1 != nil || err2 != nil || !ok {
			return bad("values")
		}
		return message{start: &started{Seq: seq, Call: callSpec{Scope: f[4], Long: f[5] == "1", Kind: kind, N: n}}}, nil
	case lineAck:
		if len(f) != 9 {
			return bad("fields")
		}
		seq, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return bad("seq")
		}
		kind, ok := parseKind(f[3])
		if !ok {
			return bad("kind")
		}
		at, err := strconv.ParseInt(f[7], 10, 64)
		if err != nil {
			return bad("time")
		}
		out, err := hex.DecodeString(f[8])
		if err != nil {
			return bad("output: " + err.Error())
		}
		return message{seq: seq, ack: &Ack{Incarnation: inc, Kind: kind, Scope: f[4], Key: f[5], Replayed: f[6] == "1",
			At: time.Unix(0, at), Output: out}}, nil
	case lineErr:
		if len(f) < 4 {
			return bad("fields")
		}
		seq, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return bad("seq")
		}
		return message{seq: seq, err: &callError{Incarnation: inc, Class: errorClass(f[3]), Message: strings.Join(f[4:], " ")}}, nil
	case lineKill:
		if len(f) != 6 {
			return bad("fields")
		}
		p, ok := parseFailPoint(f[2])
		if !ok {
			return bad("fail point")
		}
		token, err := strconv.ParseInt(f[5], 10, 64)
		if err != nil {
			return bad("token")
		}
		return message{kill: &Kill{Incarnation: inc, Point: p, Scope: f[3], Key: f[4], Token: token}}, nil
	}
	return bad("unknown line")
}
