//go:build objectstack

package objectstack

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/testdb"
)

// Stack is what a test's nodes share: one PostgreSQL database, one Redis
// bus, the platform's secret key (OS_SECRET_KEY, which encrypts sys_secret)
// and auth secret, and the platform admin's session token. Every node of a
// stack is a replica of the same platform.
type Stack struct {
	t testing.TB
	// Modules is the node_modules of the pinned platform.
	Modules string
	// DatabaseURL is the nodes' database (OS_DATABASE_URL).
	DatabaseURL string
	// Redis is the nodes' cluster bus (OS_REDIS_URL).
	Redis *Redis
	// SecretKey is OS_SECRET_KEY: 64 hex characters.
	SecretKey string
	// AuthSecret is OS_AUTH_SECRET.
	AuthSecret string
	// LogLevel is the nodes' --log-level ("info" unless changed before
	// the first StartNode).
	LogLevel string

	token string
	nodes int
}

// NewStack installs the platform if needed and makes a fresh database and
// a private Redis for the test; it starts no node.
func NewStack(t testing.TB) *Stack {
	t.Helper()
	s := &Stack{
		t:           t,
		Modules:     Modules(t),
		DatabaseURL: testdb.New(t),
		SecretKey:   randomHex(32),
		AuthSecret:  randomHex(32),
		LogLevel:    "info",
	}
	s.Redis = StartRedis(t)
	return s
}

// Admin email and password of the stack's first user (the platform admin).
const (
	AdminEmail    = "admin@example.com"
	AdminPassword = "e2e-Admin-Passw0rd!"
)

// Token returns the platform admin's session token ("" before the first
// node started). It is valid on every node of the stack.
func (s *Stack) Token() string { return s.token }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
