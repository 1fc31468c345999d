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
	k.init(32_000)
	for i := range 10_000 {
		c := Call{Tool: "t", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
		_, h, _ := k.get(c)
		k.put(c, h, store.Entry{Tool: "t"})
		require.LessOrEqual(t, k.bytes, k.budget)
	}
	held, bytes := 0, len(k.slots)*cacheSlotBytes
	for i := range k.slots {
		if c := k.slots[i].entry.Load(); c != nil {
			held++
			bytes += c.size()
		}
	}
	require.Equal(t, bytes, k.bytes, "the running count is the truth")
	require.Greater(t, held, len(k.slots)/4, "a full cache keeps most of its slots in use")
	// The latest call is always found.
	last := Call{Tool: "t", Args: json.RawMessage(`{"n":9999}`)}
	_, _, ok := k.get(last)
	require.True(t, ok)
	var off keyCache
	off.init(-1)
	c := Call{Tool: "t", Args: json.RawMessage(`{}`)}
	_, h, _ := off.get(c)
	off.put(c, h, store.Entry{Tool: "t"})
	_, _, ok = off.get(c)
	require.False(t, ok)
}
