package executor

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/store"
)

// The key cache hands back exactly the entry the recipe computes, for the
// same bytes only: another tool, another invocation id or other bytes are
// other calls.
func TestKeyCacheGivesTheRecipesEntryForTheSameBytesOnly(t *testing.T) {
	t.Parallel()
	var k keyCache
	k.init(1 << 20)
	calls := []Call{
		{Tool: "send_mail", Args: json.RawMessage(`{"to":"a"}`)},
		{Tool: "send_fax", Args: json.RawMessage(`{"to":"a"}`)},
		{Tool: "send_mail", Args: json.RawMessage(`{"to":"b"}`)},
		{Tool: "send_mail", Args: json.RawMessage(`{ "to":"a"}`)},
		{Tool: "send_mail", Args: json.RawMessage(`{"to":"a"}`), InvocationID: "inv-1"},
		{Tool: "send_mail", Args: json.RawMessage(`{"to":"a"}`), InvocationID: "inv-2"},
	}
	for _, c := range calls {
		_, h, ok := k.get(c)
		require.False(t, ok, "nothing cached yet for %+v", c)
		ent, err := EntryOf(c, store.Limits{})
		require.NoError(t, err)
		k.put(c, h, ent)
	}
	for _, c := range calls {
		got, _, ok := k.get(c)
		require.True(t, ok)
		want, err := EntryOf(c, store.Limits{})
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	// A caller reusing its buffer cannot change a cached entry's bytes.
	buf := []byte(`{"to":"z"}`)
	c := Call{Tool: "t", Args: buf}
	_, h, _ := k.get(c)
	ent, err := EntryOf(c, store.Limits{})
	require.NoError(t, err)
	k.put(c, h, ent)
	buf[7] = 'y'
	_, _, ok := k.get(Call{Tool: "t", Args: buf})
	require.False(t, ok, "other bytes, other call")
}

// The key cache stays within its byte budget, and a disabled one caches
// nothing.
func TestKeyCacheIsBounded(t *testing.T) {
	t.Parallel()
	var k keyCache
	k.init(keyCacheShards * 2000)
	for i := range 10_000 {
		c := Call{Tool: "t", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
		_, h, _ := k.get(c)
		k.put(c, h, store.Entry{Tool: "t"})
	}
	for i := range k.shards {
		require.LessOrEqual(t, k.shards[i].bytes, k.budget)
		require.NotEmpty(t, k.shards[i].m)
	}
	var off keyCache
	off.init(-1)
	c := Call{Tool: "t", Args: json.RawMessage(`{}`)}
	_, h, _ := off.get(c)
	off.put(c, h, store.Entry{Tool: "t"})
	_, _, ok := off.get(c)
	require.False(t, ok)
}
