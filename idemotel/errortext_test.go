package idemotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemstore/idemstore/executor"
	"github.com/idemstore/idemstore/keyhash"
	"github.com/idemstore/idemstore/store"
)

// hugeError is the text of an error a tool or store may give: a remote
// API's whole answer, megabytes long and not UTF-8.
var hugeError = "remote said \xff\xfe: " + strings.Repeat("é", 1<<19)

// requireBoundedErrorText checks that the span's status and exception
// carry the error's text as every other string of a call: valid UTF-8, at
// most 1024 bytes, its start kept. One invalid string makes an OTLP
// exporter drop the whole batch, and megabytes per span exhaust memory.
func requireBoundedErrorText(t *testing.T, s tracetest.SpanStub, wantType string) {
	t.Helper()
	require.Equal(t, codes.Error, s.Status.Code)
	require.True(t, utf8.ValidString(s.Status.Description))
	require.LessOrEqual(t, len(s.Status.Description), 1024)
	require.True(t, strings.HasPrefix(s.Status.Description, "remote said \uFFFD"), s.Status.Description[:40])
	require.Len(t, s.Events, 1)
	require.Equal(t, "exception", s.Events[0].Name)
	ev := map[string]string{}
	for _, kv := range s.Events[0].Attributes {
		ev[string(kv.Key)] = kv.Value.AsString()
	}
	require.Equal(t, s.Status.Description, ev["exception.message"])
	require.Equal(t, wantType, ev["exception.type"], "as the SDK's RecordError names it")
}

func TestErrorTextOnSpansIsBoundedValidUTF8(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.behave = func(context.Context, executor.Call) (executor.Result, error) {
		return executor.Result{}, errors.New(hugeError)
	}
	_, err := b.executor(t, b, nil).Execute(context.Background(), mail("c1"))
	require.Error(t, err)
	call := one(t, b.takeSpans(), "execute_tool send_mail")
	requireBoundedErrorText(t, call, "*errors.errorString")

	st, err := b.tel.WrapCallStore(failingGet{b.mem}, nil)
	require.NoError(t, err)
	_, err = st.Get(context.Background(), testScope, keyhash.IDKey("k"))
	require.Error(t, err)
	requireBoundedErrorText(t, one(t, b.takeSpans(), "Get"), "*idemotel_test.unavailable")
}

// failingGet is a store whose Get fails with hugeError.
type failingGet struct{ store.CallStore }

func (failingGet) Get(context.Context, string, keyhash.Sum) (store.Record, error) {
	return store.Record{}, &unavailable{}
}

type unavailable struct{}

func (*unavailable) Error() string { return hugeError }
func (*unavailable) Unwrap() error { return store.ErrUnavailable }
