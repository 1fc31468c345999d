package runtime

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/idemstore/idemstore/contract"
)

// Abbreviate renders a tool output (or arguments) for a one-line progress
// step. Invalid UTF-8 becomes U+FFFD, and control characters (newlines,
// tabs, C1 controls such as U+0085) and the line and paragraph separators
// (U+2028, U+2029) become spaces, so a step is always one line. An output of at most max
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
		// Every control character, C1 as well as C0 (U+0085 is a line
		// break), and the Unicode line and paragraph separators: each can
		// start a new line where the step is shown.
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
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

// maxStepName bounds, in characters, the tool name a step shows: as many as
// the store accepts by default (contract.DefaultMaxToolBytes bytes are at
// most that many characters), so a name the store takes is shown whole.
const maxStepName = contract.DefaultMaxToolBytes

// stepName renders a tool name for a step. The model chooses the name, and
// an unknown one is validated nowhere before its "refused" step: unfiltered,
// a name holding a newline would forge a second step, and a long one would
// flood the line. A real tool's name (printable, within the store's default
// limit) comes out unchanged.
func stepName(tool string) string {
	return Abbreviate([]byte(tool), maxStepName)
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
	w.emit("Calling tool " + stepName(tool) + "(" + Abbreviate(compactJSON(args), w.max) + ")")
}

func (w stepWriter) reused(tool string, output []byte) {
	w.emit("  " + stepName(tool) + " reused cached result: " + Abbreviate(output, w.max))
}

func (w stepWriter) reusedFailure(tool string, output []byte) {
	w.emit("  " + stepName(tool) + " reused cached failure: " + Abbreviate(output, w.max))
}

func (w stepWriter) refused(tool string, err error) {
	w.emit("  " + stepName(tool) + " refused: " + Abbreviate([]byte(err.Error()), w.max))
}

func (w stepWriter) failed(tool string, output []byte) {
	w.emit("  " + stepName(tool) + " failed: " + Abbreviate(output, w.max))
}

func (w stepWriter) failover(from, to string, err error) {
	// Model names come from configuration (an openaimodel's is its model
	// name and host): cut to one line and a bounded length, as a tool's
	// name is, so that a step stays one line.
	w.emit("Switching model from " + stepName(from) + " to " + stepName(to) + " after a transient failure: " + Abbreviate([]byte(err.Error()), w.max))
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
