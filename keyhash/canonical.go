package keyhash

import (
	"bytes"
	"encoding/json"
)

// Canonicalize returns the canonical form of JSON arguments under lim.
// Absent (empty or all white space) arguments, null and {} all give "{}".
//
// TEMPORARY: a placeholder to be replaced by the exact recipe.
func Canonicalize(args []byte, lim Limits) ([]byte, error) {
	lim = lim.withDefaults()
	if len(args) > lim.MaxArgBytes {
		return nil, &LimitError{Limit: "MaxArgBytes", Value: len(args), Max: lim.MaxArgBytes}
	}
	t := bytes.TrimSpace(args)
	if len(t) == 0 || string(t) == "null" {
		return []byte("{}"), nil
	}
	var v any
	if err := json.Unmarshal(t, &v); err != nil {
		return nil, &ArgumentsError{Problem: err.Error(), Offset: -1}
	}
	return json.Marshal(v)
}
