package mcptools

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SessionScopePrefix starts the scope the proxy gives a client session
// whose calls name no scope; a random id follows.
const SessionScopePrefix = "mcp-session-"

// sessionScopes gives every client session a scope of its own: a random
// id, since the SDK's session id is "" over stdio (so it would put every
// stdio client of a durable store in one scope) and only as unique as the
// HTTP handler makes it. The zero value is ready to use.
type sessionScopes struct {
	mu     sync.Mutex
	scopes map[*mcp.ServerSession]string // live sessions' scopes; guarded by mu
}

// scope returns the scope of ss, drawing it on the session's first call.
// The entry goes when the session ends.
func (s *sessionScopes) scope(ss *mcp.ServerSession) (string, error) {
	if ss == nil {
		return "", fmt.Errorf("mcptools: a call without a session")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if scope, ok := s.scopes[ss]; ok {
		return scope, nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mcptools: drawing a session scope: %w", err)
	}
	scope := SessionScopePrefix + hex.EncodeToString(b[:])
	if s.scopes == nil {
		s.scopes = make(map[*mcp.ServerSession]string)
	}
	s.scopes[ss] = scope
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		delete(s.scopes, ss)
		s.mu.Unlock()
	}()
	return scope, nil
}
