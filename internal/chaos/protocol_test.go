package chaos

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

func TestEveryWorkerLineParsesBackToWhatWasWritten(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	lw := &lineWriter{w: &buf, inc: 7}
	call := callSpec{Scope: "long-1", Long: true, Kind: KindOrder, N: 12345}
	out := Output{Kind: KindOrder, Token: 42, Scope: "long-1", Key: "ab", Attempt: 2, Incarnation: 7}.Encode()
	lw.ready()
	lw.start(3, call)
	at := time.Unix(1_700_000_000, 123456789)
	lw.ack(3, KindOrder, "long-1", "ab", true, at, out)
	lw.fail(4, classUnavailable, "store\nunavailable:   claim")
	lw.kill(AfterEffect, "long-1", "ab", 42)
	lw.kill(BeforeClaim, "", "", 0)

	var msgs []message
	for _, l := range bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")) {
		m, err := parseLine(string(l))
		require.NoError(t, err, string(l))
		msgs = append(msgs, m)
	}
	require.Len(t, msgs, 6)
	require.Equal(t, 7, *msgs[0].ready)
	require.Equal(t, started{Seq: 3, Call: call}, *msgs[1].start)
	require.Equal(t, Ack{Incarnation: 7, Kind: KindOrder, Scope: "long-1", Key: "ab", Replayed: true, At: at, Output: out}, *msgs[2].ack)
	require.Equal(t, int64(3), msgs[2].seq)
	require.Equal(t, callError{Incarnation: 7, Class: classUnavailable, Message: "store unavailable: claim"}, *msgs[3].err)
	require.Equal(t, int64(4), msgs[3].seq)
	require.Equal(t, Kill{Incarnation: 7, Point: AfterEffect, Scope: "long-1", Key: "ab", Token: 42}, *msgs[4].kill)
	require.Equal(t, Kill{Incarnation: 7, Point: BeforeClaim, Scope: "-", Key: "-"}, *msgs[5].kill)
}

func TestMalformedWorkerLinesAreRefused(t *testing.T) {
	t.Parallel()
	for _, l := range []string{"", "ACK", "ACK x", "ACK 1 2 remote s k 0 5 zz", "ACK 1 2 teleport s k 0 5 00", "ACK 1 2 remote s k 0 x 00", "ACK 1 2 remote s k 0 00",
		"KILL 1 somewhere s k 0", "START 1 2 remote s 1", "ERR 1 2", "HELLO 1"} {
		_, err := parseLine(l)
		require.Error(t, err, "%q", l)
	}
}

func TestOutputNamesItsProducer(t *testing.T) {
	t.Parallel()
	o := Output{Kind: KindRemote, Token: 9, Scope: "short-3", Key: "00ff", Attempt: 1, Incarnation: 4}
	got, err := DecodeOutput(o.Encode())
	require.NoError(t, err)
	require.Equal(t, o, got)
	for _, b := range []string{"", "hello", "chaos/v1 kind=remote token=x scope=s key=k attempt=1 inc=1",
		"chaos/v1 kind=remote token=01 scope=s key=k attempt=1 inc=1"} {
		_, err := DecodeOutput([]byte(b))
		require.Error(t, err, "%q", b)
	}
}

func TestErrorsThatCannotHappenAreClassedAsBugs(t *testing.T) {
	t.Parallel()
	require.Equal(t, classBug, classify(&toolError{err: &store.MismatchError{Scope: "s"}}))
	require.Equal(t, classTool, classify(&toolError{err: bytes.ErrTooLarge}))
}
