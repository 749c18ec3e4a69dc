package orchhost

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	js "github.com/nats-io/nats.go/jetstream"
)

// The key that signs MCP session ids (mcpfront.Config.SessionKey) is
// shared by every orchestrator of a pool through JetStream: the first to
// start creates it, the others read it, so that any replica behind a load
// balancer serves a session another opened.
const (
	// MCPBucket is the KV bucket of the MCP front's shared state.
	MCPBucket = "toolpool_mcp"
	// mcpSessionKey is the entry holding the session key.
	mcpSessionKey = "session_key"
	// mcpSessionKeyBytes is the length of a key created here.
	mcpSessionKeyBytes = 32
)

// mcpSessionKeyFrom returns the pool's MCP session key from j, creating
// the bucket (with replicas) and the key when they do not exist yet.
func mcpSessionKeyFrom(ctx context.Context, j js.JetStream, replicas int) ([]byte, error) {
	kv, err := j.KeyValue(ctx, MCPBucket)
	if errors.Is(err, js.ErrBucketNotFound) {
		kv, err = j.CreateKeyValue(ctx, js.KeyValueConfig{
			Bucket:      MCPBucket,
			Description: "toolpool: the MCP front's state shared by the orchestrators (the key signing session ids)",
			History:     1,
			Replicas:    replicas,
		})
		if errors.Is(err, js.ErrBucketExists) {
			kv, err = j.KeyValue(ctx, MCPBucket) // created meanwhile by another process
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open the KV bucket %s: %w", MCPBucket, err)
	}
	e, err := kv.Get(ctx, mcpSessionKey)
	if err == nil {
		return e.Value(), nil
	}
	if !errors.Is(err, js.ErrKeyNotFound) {
		return nil, fmt.Errorf("read %s in %s: %w", mcpSessionKey, MCPBucket, err)
	}
	key := make([]byte, mcpSessionKeyBytes)
	_, _ = rand.Read(key)
	if _, err := kv.Create(ctx, mcpSessionKey, key); err != nil {
		if !errors.Is(err, js.ErrKeyExists) {
			return nil, fmt.Errorf("create %s in %s: %w", mcpSessionKey, MCPBucket, err)
		}
		if e, err = kv.Get(ctx, mcpSessionKey); err != nil { // created meanwhile by another process
			return nil, fmt.Errorf("read %s in %s: %w", mcpSessionKey, MCPBucket, err)
		}
		return e.Value(), nil
	}
	return key, nil
}
