package agent

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolpool/toolpool/pkg/client"
)

// Defaults of Loop.
const (
	ModelDefault         = anthropic.ModelClaudeOpus4_6
	MaxTokensDefault     = 4096
	MaxIterationsDefault = 20
)

// ErrMaxIterations is wrapped by the error of a Run that reached
// MaxIterations while the model still asked for tools.
var ErrMaxIterations = errors.New("agent: iteration limit reached")

// MessageClient sends a Messages API request: &anthropic.Client.Messages
// (an *anthropic.MessageService) implements it.
type MessageClient interface {
	New(ctx context.Context, params anthropic.MessageNewParams, opts ...option.RequestOption) (*anthropic.Message, error)
}

// Dispatcher runs the tool_use blocks of one assistant turn and returns one
// tool_result per block, in order, failed calls as results with IsError.
// *client.Pool (over the HTTP API) and *client.Local (in-process)
// implement it.
type Dispatcher interface {
	Dispatch(ctx context.Context, session string, uses []anthropic.ToolUseBlock) ([]anthropic.ToolResultBlockParam, error)
}

// Loop is an agent loop: it sends the conversation to the model, runs the
// tool calls of each assistant turn through the pool (all of a turn's calls
// in one Dispatch, in parallel), appends the results, and repeats until the
// model answers without calling tools. Zero fields take their defaults.
type Loop struct {
	// Client sends the Messages API requests. Required.
	Client MessageClient
	// Dispatcher runs the tool calls. Required.
	Dispatcher Dispatcher
	// Tools are the tools offered to the model.
	Tools []anthropic.ToolUnionParam
	// Model is the model to call. Default ModelDefault.
	Model anthropic.Model
	// MaxTokens caps each model answer. Default MaxTokensDefault.
	MaxTokens int64
	// MaxIterations caps the model requests of one Run. Default
	// MaxIterationsDefault.
	MaxIterations int
	// System is the system prompt; empty for none.
	System string
	// Session scopes the pool's advice against retrying a tool that keeps
	// failing. Default: a new random id per Run.
	Session string
	// ToolTimeout bounds the wait for one turn's tool results; a call with
	// no result by then comes back as an is_error result. Default: the
	// dispatcher's (one minute for the pool).
	ToolTimeout time.Duration
	// Logger receives a record per model turn and per tool result.
	// Default slog.Default().
	Logger *slog.Logger
}

// Result is the outcome of a Run.
type Result struct {
	// Text is the text of the model's last answer.
	Text string
	// StopReason is why the last answer ended: "end_turn", "max_tokens", …
	StopReason anthropic.StopReason
	// Iterations is the number of model requests made.
	Iterations int
	// ToolCalls and ToolErrors count the tool calls run and those whose
	// result was an error.
	ToolCalls, ToolErrors int
	// Messages is the whole conversation, the task first.
	Messages []anthropic.MessageParam
}

// Run runs the loop on task until the model answers without calling tools.
// The error wraps ErrMaxIterations when the model still asked for tools
// after MaxIterations requests (the Result holds what was done), or says
// which model request or dispatch failed.
func (l *Loop) Run(ctx context.Context, task string) (Result, error) {
	if l.Client == nil || l.Dispatcher == nil {
		return Result{}, errors.New("agent: Loop.Client and Loop.Dispatcher are required")
	}
	if strings.TrimSpace(task) == "" {
		return Result{}, errors.New("agent: the task is empty")
	}
	if l.MaxTokens < 0 || l.MaxIterations < 0 || l.ToolTimeout < 0 {
		return Result{}, fmt.Errorf("agent: MaxTokens (%d), MaxIterations (%d) and ToolTimeout (%v) must not be negative",
			l.MaxTokens, l.MaxIterations, l.ToolTimeout)
	}
	c := l.withDefaults()
	res := Result{Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(task))}}
	for i := 1; i <= c.MaxIterations; i++ {
		params := anthropic.MessageNewParams{Model: c.Model, MaxTokens: c.MaxTokens, Messages: res.Messages, Tools: c.Tools}
		if c.System != "" {
			params.System = []anthropic.TextBlockParam{{Text: c.System}}
		}
		msg, err := c.Client.New(ctx, params)
		if err != nil {
			return res, fmt.Errorf("agent: model request %d failed: %w", i, err)
		}
		res.Iterations = i
		res.Messages = append(res.Messages, msg.ToParam())
		res.Text = text(msg)
		res.StopReason = msg.StopReason
		uses := client.ToolUseBlocks(msg)
		c.Logger.InfoContext(ctx, "model turn", slog.Int("iteration", i), slog.String("stop_reason", string(msg.StopReason)),
			slog.Int("tool_calls", len(uses)))

		switch {
		case len(uses) > 0 && msg.StopReason != anthropic.StopReasonMaxTokens:
		case msg.StopReason == anthropic.StopReasonPauseTurn:
			if i == c.MaxIterations {
				return res, fmt.Errorf("%w: the model paused its turn at request %d of %d", ErrMaxIterations, i, c.MaxIterations)
			}
			continue // send the paused turn back as it is, to let it go on
		default:
			return res, nil
		}
		if i == c.MaxIterations {
			return res, fmt.Errorf("%w: after %d model requests the model still asked for tools (%s)",
				ErrMaxIterations, c.MaxIterations, names(uses))
		}
		if err := c.runTools(ctx, i, uses, &res); err != nil {
			return res, err
		}
	}
	return res, fmt.Errorf("%w: %d model requests", ErrMaxIterations, c.MaxIterations) // not reached: the loop returns
}

// withDefaults is l with its zero fields set to their defaults, a new
// random Session among them.
func (l *Loop) withDefaults() Loop {
	c := *l
	c.Model = cmp.Or(c.Model, ModelDefault)
	c.MaxTokens = cmp.Or(c.MaxTokens, MaxTokensDefault)
	c.MaxIterations = cmp.Or(c.MaxIterations, MaxIterationsDefault)
	if c.Session == "" {
		c.Session = newSession()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// runTools runs the tool calls of turn i and appends their results to
// res's conversation.
func (l *Loop) runTools(ctx context.Context, i int, uses []anthropic.ToolUseBlock, res *Result) error {
	results, err := l.dispatch(ctx, l.Session, uses)
	if err != nil {
		return fmt.Errorf("agent: running the %d tool calls of turn %d: %w", len(uses), i, err)
	}
	if len(results) != len(uses) {
		return fmt.Errorf("agent: turn %d: %d results for %d tool calls", i, len(results), len(uses))
	}
	for j, r := range results {
		isErr := r.IsError.Valid() && r.IsError.Value
		res.ToolCalls++
		if isErr {
			res.ToolErrors++
		}
		l.Logger.InfoContext(ctx, "tool result", slog.String("tool", uses[j].Name), slog.String("id", uses[j].ID), slog.Bool("is_error", isErr))
	}
	res.Messages = append(res.Messages, client.UserMessage(results))
	return nil
}

// dispatch runs one turn's calls, within ToolTimeout when it is set.
func (l *Loop) dispatch(ctx context.Context, session string, uses []anthropic.ToolUseBlock) ([]anthropic.ToolResultBlockParam, error) {
	if l.ToolTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.ToolTimeout)
		defer cancel()
	}
	return l.Dispatcher.Dispatch(ctx, session, uses)
}

// text joins the text blocks of msg.
func text(msg *anthropic.Message) string {
	var parts []string
	for _, c := range msg.Content {
		if c.Type == "text" && c.Text != "" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// names lists the tools of uses, e.g. "echo, flaky".
func names(uses []anthropic.ToolUseBlock) string {
	out := make([]string, len(uses))
	for i, u := range uses {
		out[i] = u.Name
	}
	return strings.Join(out, ", ")
}

func newSession() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "agent-" + hex.EncodeToString(b[:])
}
