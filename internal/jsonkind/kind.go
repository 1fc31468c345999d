// Package jsonkind names the kind of a JSON value by its first byte, for
// error messages that say what a caller sent instead of an object: keyhash
// and mcptools refuse the same arguments in the same words.
package jsonkind

// Of names the kind of the JSON value whose first byte is first ("an
// array", "a string", "a boolean", else "a number"); objects and null are
// the callers' own cases.
func Of(first byte) string {
	switch first {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}
