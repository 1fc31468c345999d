package nilness

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type fn func()

func (fn) Do() {}

type doer interface{ Do() }

type ptr struct{}

func (*ptr) Do() {}

func TestIsNilSeesNilsInsideInterfaces(t *testing.T) {
	var (
		nilPtr *ptr
		nilFn  fn
		set    = fn(func() {})
	)
	for name, v := range map[string]doer{"nil": nil, "nil pointer": nilPtr, "nil func": nilFn} {
		require.True(t, IsNil(v), name)
	}
	for name, v := range map[string]doer{"pointer": &ptr{}, "func": set} {
		require.False(t, IsNil(v), name)
	}
	require.False(t, IsNil(0), "a value of a kind that cannot be nil")
	require.False(t, IsNil(struct{}{}))
}
