package ops

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/pkg/discovery"
	"github.com/toolpool/toolpool/pkg/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// CallConfig configures Call.
type CallConfig struct {
	// JetStream is the pool's server. Required.
	JetStream js.JetStream
	// Logger logs the dispatcher's and the live catalog's warnings.
	// Default: slog.Default().
	Logger *slog.Logger
	// Session is the agent session the call belongs to (it scopes the
	// repeated-failure advice). Default "".
	Session string
}

// Call sends one call of tool with input through the pool, as an agent's
// tool_use block with a new id, and returns its tool_result block. It
// opens the live catalog and a dispatcher of its own, under a new
// instance, for the one call; ctx bounds it all. An error means the call
// could not be made (no pool, no stream); a call that failed is a result
// with IsError.
func Call(ctx context.Context, cfg CallConfig, tool string, input json.RawMessage) (envelope.ToolResultBlock, error) {
	if cfg.JetStream == nil {
		return envelope.ToolResultBlock{}, errors.New("ops: CallConfig.JetStream is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	live, err := discovery.NewCatalog(ctx, discovery.CatalogConfig{JetStream: cfg.JetStream, Logger: cfg.Logger})
	if err != nil {
		return envelope.ToolResultBlock{}, err
	}
	defer live.Close()
	d, err := dispatch.New(dispatch.Config{
		JS: cfg.JetStream, Catalog: live, Logger: cfg.Logger,
		Instance: "call-" + nuid.Next(),
	})
	if err != nil {
		return envelope.ToolResultBlock{}, err
	}
	if err := d.Start(ctx); err != nil {
		return envelope.ToolResultBlock{}, err
	}
	defer d.Stop()
	blocks, err := d.DispatchBlocks(ctx, cfg.Session, []envelope.ToolUseBlock{{
		Type: "tool_use", ID: "toolu_cli_" + nuid.Next(), Name: tool, Input: input,
	}})
	if err != nil {
		return envelope.ToolResultBlock{}, err
	}
	return blocks[0], nil
}
