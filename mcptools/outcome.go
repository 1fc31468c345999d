package mcptools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Top-level keys of a CallToolResult that are never stored: the result
// type (a stored result is complete) and the fields of an input-required
// result (such a result is not stored at all).
var unstoredKeys = []string{"resultType", "inputRequests", "requestState"}

// encodeOutcome returns the bytes stored as the outcome of a tools/call: raw,
// the result as the server sent it, or res re-encoded when raw is nil (see
// the package doc for what changes).
func encodeOutcome(raw []byte, res *mcp.CallToolResult) ([]byte, error) {
	if raw == nil {
		var err error
		if raw, err = json.Marshal(res); err != nil {
			return nil, fmt.Errorf("mcptools: encoding the result: %w", err)
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("mcptools: the result is not a JSON object: %w", err)
	}
	if obj == nil {
		// null decodes to no map and no error; the SDK reads it as an empty
		// result, which would be stored as the call's outcome, "{}".
		return nil, fmt.Errorf("mcptools: the result is null, not a JSON object")
	}
	for _, k := range unstoredKeys {
		delete(obj, k)
	}
	if m, ok := obj["_meta"]; ok {
		meta, err := metaWithoutReserved(m)
		if err != nil {
			return nil, err
		}
		if meta == nil {
			delete(obj, "_meta")
		} else {
			obj["_meta"] = meta
		}
	}
	return writeObject(obj)
}

// metaWithoutReserved returns the raw _meta object without its reserved
// keys, nil when none is left.
func metaWithoutReserved(raw json.RawMessage) (json.RawMessage, error) {
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("mcptools: the result's _meta is not a JSON object: %w", err)
	}
	for k := range meta {
		if isReserved(k) {
			delete(meta, k)
		}
	}
	if len(meta) == 0 {
		return nil, nil
	}
	return writeObject(meta)
}

// writeObject writes obj as a JSON object with sorted keys, each value
// compacted but otherwise as it is: no re-encoding, no HTML escaping.
func writeObject(obj map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := enc.Encode(k); err != nil {
			return nil, fmt.Errorf("mcptools: encoding the result: %w", err)
		}
		buf.Truncate(buf.Len() - 1) // Encode ends with a newline
		buf.WriteByte(':')
		if err := json.Compact(&buf, obj[k]); err != nil {
			return nil, fmt.Errorf("mcptools: the result's %q is not valid JSON: %w", k, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// DecodeResult turns a stored outcome (executor.Result.Output of a Caller's
// call, replayed or not) back into a tools/call result. Its structured
// content is the stored JSON itself (a json.RawMessage), so a server that
// hands the result on sends those bytes; content blocks and _meta are decoded.
// Each call returns a new result with a new Meta map, which the caller may
// change. Output that is not a JSON object (null included, which no Caller
// stores) is an error.
func DecodeResult(output []byte) (*mcp.CallToolResult, error) {
	if t := bytes.TrimLeft(output, " \t\r\n"); len(t) > 0 && t[0] != '{' {
		// null decodes to an empty result and no error: a stored outcome
		// of null (an operator's resolution, another store's bytes) would
		// be handed out as a tool that returned nothing.
		return nil, fmt.Errorf("mcptools: decoding a stored result: not a JSON object")
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(output, &res); err != nil {
		return nil, fmt.Errorf("mcptools: decoding a stored result: %w", err)
	}
	var raw struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(output, &raw); err != nil {
		return nil, fmt.Errorf("mcptools: decoding a stored result: %w", err)
	}
	if len(raw.StructuredContent) > 0 && !bytes.Equal(raw.StructuredContent, []byte("null")) {
		res.StructuredContent = raw.StructuredContent
	}
	return &res, nil
}
