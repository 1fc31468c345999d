package mcptools_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemstore/idemstore/internal/mcptest"
	"github.com/idemstore/idemstore/mcptools"
)

func TestListToolsKeepsInputSchemasByteForByte(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	tools, err := mcptools.ListTools(testContext(t), srv.session)
	require.NoError(t, err)

	names := make([]string, 0, len(tools))
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.Name == mcptest.ToolSend {
			require.Equal(t, json.RawMessage(mcptest.SendSchema), tool.InputSchema,
				"the schema's key order and spacing are the server's")
			require.Equal(t, "Sends a message (a side effect): each run is logged.", tool.Description)
		}
	}
	require.ElementsMatch(t, []string{mcptest.ToolSend, mcptest.ToolFail, mcptest.ToolAsk, mcptest.ToolMeta, mcptest.ToolCrash}, names)
}
