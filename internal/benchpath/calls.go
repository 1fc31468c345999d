package benchpath

import (
	"fmt"

	"github.com/idemstore/idemstore/executor"
)

// benchTool is the tool name of every measured call.
const benchTool = "send_mail"

// Data set tags: the calls of different sets never share arguments.
const (
	tagHit   = "h" // the stored calls the replay pairs look up
	tagMiss  = "m" // new calls, one per miss
	tagScale = "s" // the calls of CaseScale's tables
)

// argsOf returns the arguments of call id of the set tag: about 150 bytes
// of JSON that is already canonical (keys sorted, no white space, no number
// keyhash would rewrite), which is what a model usually sends. Every call
// of a set has arguments of the same length.
func argsOf(tag string, id int64) []byte {
	return fmt.Appendf(make([]byte, 0, 160),
		`{"body":"Weekly status of the project: lorem ipsum dolor sit amet.","priority":3,"subject":"status %[1]s%012[2]d","to":"team-%[1]s%012[2]d@example.com"}`,
		tag, id)
}

// callOf is call id of the set tag.
func callOf(tag string, id int64) executor.Call {
	return executor.Call{Tool: benchTool, Args: argsOf(tag, id)}
}

// resultOf returns a tool result of n bytes, shaped like a JSON answer.
func resultOf(n int) []byte {
	const head, tail = `{"ok":true,"data":"`, `"}`
	if n < len(head)+len(tail) {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'x'
		}
		return b
	}
	b := make([]byte, 0, n)
	b = append(b, head...)
	for len(b) < n-len(tail) {
		b = append(b, byte('a'+len(b)%26))
	}
	return append(b, tail...)
}
