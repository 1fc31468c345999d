package runtime

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Abbreviate renders a tool output (or arguments) for a one-line progress
// step. Invalid UTF-8 becomes U+FFFD and control characters (newlines, tabs)
// become spaces, so a step is always one line. An output of at most max
// characters (runes) is shown whole; a longer one shows its first max
// characters, then "… (N bytes)" with N the full length in bytes. max <= 0
// means DefaultMaxStepOutput. Only the step is abbreviated: the model always
// gets the full output.
func Abbreviate(output []byte, max int) string {
	if max <= 0 {
		max = DefaultMaxStepOutput
	}
	s := strings.ToValidUTF8(string(output), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + "… (" + strconv.Itoa(len(output)) + " bytes)"
		}
		n++
	}
	return s // unreachable: the rune count is above max
}

// stepWriter formats the run's progress steps. Their text is part of the
// package's contract (see the package doc), so it lives in one place.
type stepWriter struct {
	emit func(string)
	max  int
}

func (w stepWriter) attempt(n, of int) {
	w.emit("Attempt " + strconv.Itoa(n) + " of " + strconv.Itoa(of))
}

func (w stepWriter) calling(tool string, args json.RawMessage) {
	w.emit("Calling tool " + tool + "(" + Abbreviate(compactJSON(args), w.max) + ")")
}

func (w stepWriter) reused(tool string, output []byte) {
	w.emit("  " + tool + " reused cached result: " + Abbreviate(output, w.max))
}

func (w stepWriter) reusedFailure(tool string, output []byte) {
	w.emit("  " + tool + " reused cached failure: " + Abbreviate(output, w.max))
}

func (w stepWriter) refused(tool string, err error) {
	w.emit("  " + tool + " refused: " + Abbreviate([]byte(err.Error()), w.max))
}

func (w stepWriter) failed(tool string, output []byte) {
	w.emit("  " + tool + " failed: " + Abbreviate(output, w.max))
}

func (w stepWriter) failover(from, to string, err error) {
	w.emit("Switching model from " + from + " to " + to + " after a transient failure: " + Abbreviate([]byte(err.Error()), w.max))
}

func (w stepWriter) rejected(feedback string) {
	w.emit("Quality gate rejected the answer: " + Abbreviate([]byte(feedback), w.max))
}

func (w stepWriter) accepted(attempts int) {
	w.emit("Answer accepted after " + plural(attempts, "attempt"))
}

// compactJSON shows arguments without insignificant white space; anything
// that is not JSON is shown as it came.
func compactJSON(args json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return args
	}
	return buf.Bytes()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
