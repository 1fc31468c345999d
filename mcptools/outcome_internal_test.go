package mcptools

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

func TestStoredOutcomeDropsTheResultTypeAndProtocolMetaAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"structuredContent": {"b":1, "a":1.50, "s":"<&>"}, "resultType":"complete",
		"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"},"trace/id":"t-1"},"content":[{"type":"text","text":"x"}],"isError":true}`)
	out, err := encodeOutcome(raw, nil)
	require.NoError(t, err)
	require.Equal(t,
		`{"_meta":{"trace/id":"t-1"},"content":[{"type":"text","text":"x"}],"isError":true,"structuredContent":{"b":1,"a":1.50,"s":"<&>"}}`,
		string(out), "sorted top level, values compacted but not re-encoded (no HTML escaping)")

	onlyProtocol := []byte(`{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{}}}`)
	out, err = encodeOutcome(onlyProtocol, nil)
	require.NoError(t, err)
	require.Equal(t, `{"content":[]}`, string(out))
}

func TestStoredOutcomeWithoutRawBytesIsTheSDKsEncoding(t *testing.T) {
	t.Parallel()
	res := &mcp.CallToolResult{
		Meta:              mcp.Meta{"io.modelcontextprotocol/serverInfo": "x", "k": "v"},
		Content:           []mcp.Content{&mcp.TextContent{Text: "hi"}},
		StructuredContent: map[string]any{"z": 1, "a": 2},
	}
	out, err := encodeOutcome(nil, res)
	require.NoError(t, err)
	require.Equal(t, `{"_meta":{"k":"v"},"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":2,"z":1}}`, string(out))
}

func TestStoredOutcomeThatIsNotAnObjectIsAnError(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`[]`, `"x"`, `{"_meta":[]}`, `{`} {
		_, err := encodeOutcome([]byte(raw), nil)
		require.Error(t, err, raw)
	}
}

func TestDecodeResultGivesTheStoredStructuredContentAndANewMetaEachTime(t *testing.T) {
	t.Parallel()
	stored := []byte(`{"_meta":{"k":"v"},"content":[{"type":"text","text":"hi"}],"structuredContent":{"z":1,"big":123456789012345678901}}`)
	a, err := DecodeResult(stored)
	require.NoError(t, err)
	b, err := DecodeResult(stored)
	require.NoError(t, err)
	require.Equal(t, json.RawMessage(`{"z":1,"big":123456789012345678901}`), a.StructuredContent)
	a.Meta["k"] = "changed"
	require.Equal(t, "v", b.Meta["k"])

	none, err := DecodeResult([]byte(`{"content":[],"structuredContent":null}`))
	require.NoError(t, err)
	require.Nil(t, none.StructuredContent)
	_, err = DecodeResult([]byte(`not json`))
	require.Error(t, err)
}

// A stored outcome that is not a JSON object is refused, null as well: it
// decoded to an empty result with no error, handed out as a tool that
// returned nothing, where encodeOutcome refuses a null result.
func TestDecodeResultRefusesAnOutcomeThatIsNotAnObjectNullIncluded(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`null`, ` null`, `[]`, `"x"`, `5`, ``} {
		res, err := DecodeResult([]byte(raw))
		require.Error(t, err, "%q", raw)
		require.Nil(t, res, "%q", raw)
	}
}

func TestForwardedMetaIsANewMapWithoutProtocolKeys(t *testing.T) {
	t.Parallel()
	in := mcp.Meta{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "trace/id": "t-1"}
	out := forwardMeta(in, "dk")
	require.Equal(t, mcp.Meta{"trace/id": "t-1", MetaDownstreamKey: "dk"}, out)
	out["x"] = 1
	require.NotContains(t, in, "x")
	require.Nil(t, forwardMeta(mcp.Meta{"io.modelcontextprotocol/clientInfo": 1}, ""))
}
