package opscmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/agent"
	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/pkg/client"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Exit codes of orchestrator run, besides cli.ExitOK (the answer was
// printed), cli.ExitIsError (the model API or the pool failed during the
// run) and cli.ExitUsage (bad flags, no ANTHROPIC_API_KEY, or no pool to
// run the tools on).
const exitIterationLimit = 3 // the model still asked for tools at --max-iterations

// runHelp is run's help text.
const runHelp = `Runs an agent loop against the Anthropic Messages API: the model's tool calls
run on the pool, all calls of a turn in parallel, until the model answers
without calling tools; the answer is printed on stdout.

The pool: with no --nats-url and no --api, an embedded JetStream server (on a
free loopback port, its store in a temporary directory unless --data-dir is
given) with --workers in-process workers, as serve runs them; with --nats-url,
the pool of that server, its tools read from the live catalog; with --api, the
HTTP API of a running orchestrator.

Environment: ANTHROPIC_API_KEY (required), ANTHROPIC_BASE_URL (another
Messages API endpoint).

Exit codes: 0 answered; 1 the model API or the pool failed; 2 bad flags, no
ANTHROPIC_API_KEY or no pool; 3 the model still called tools at
--max-iterations.`

// Pool is the pool "run" starts for itself when --api is not given: the
// flags that set it up and a way to run it. cmd/orchestrator passes
// serve's.
type Pool interface {
	// Register adds the pool's flags to fs, with the defaults of a pool a
	// command starts for itself (no HTTP server, quiet logs).
	Register(fs *flag.FlagSet)
	// Check sets the defaults that depend on other flags and validates
	// the pool's flags once they are parsed; given reports which were
	// given. Its errors name the flag.
	Check(given func(name string) bool) error
	// NATSURL is the server the pool joins (--nats-url), "" for an
	// embedded one.
	NATSURL() string
	// Logger is the logger the pool's flags ask for, writing to w.
	Logger(w io.Writer) (*slog.Logger, error)
	// TempDataDir gives an embedded server without a store of its own a
	// temporary one, its name starting with prefix; remove deletes it.
	TempDataDir(prefix string) (remove func(), err error)
	// Serve starts the pool, calls ready once it is up and stops the pool
	// when ready returns (or ctx ends first).
	Serve(ctx context.Context, log *slog.Logger, ready func(ctx context.Context, orch *toolpool.Orchestrator)) error
}

// Run is "orchestrator run": an agent loop on the Anthropic Messages API
// whose tool calls run on the pool: the HTTP API of --api, or pool.
func Run(pool Pool) *cli.Command {
	r := &runCmd{pool: pool}
	return &cli.Command{
		Name:    "run",
		Args:    `--task "…" [flags]`,
		Summary: "an agent loop on the Anthropic Messages API, its tool calls run on the pool",
		Help:    runHelp,
		Flags: func(fs *flag.FlagSet) {
			pool.Register(fs)
			r.register(fs)
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			if err := pool.Check(env.Given); err != nil {
				return err
			}
			if err := r.check(); err != nil {
				return err
			}
			return cli.Exit(r.runAgent(ctx, env))
		},
	}
}

// runCmd is "orchestrator run": its own flags and the pool's.
type runCmd struct {
	pool          Pool
	task          string
	model         string
	maxTokens     int64
	maxIterations int
	system        string
	session       string
	api           string
	toolTimeout   time.Duration
}

// register adds run's own flags to fs, after the pool's.
func (r *runCmd) register(fs *flag.FlagSet) {
	fs.StringVar(&r.task, "task", "", "the task for the agent (required)")
	fs.StringVar(&r.model, "model", string(agent.ModelDefault), "the model")
	fs.Int64Var(&r.maxTokens, "max-tokens", agent.MaxTokensDefault, "the most tokens of each model answer")
	fs.IntVar(&r.maxIterations, "max-iterations", agent.MaxIterationsDefault, "the most model requests; reaching it with tools still called exits 3")
	fs.StringVar(&r.system, "system", "", "the system prompt")
	fs.StringVar(&r.session, "session", "", "the agent session id, which scopes the pool's advice against retrying a failing tool (default random)")
	fs.StringVar(&r.api, "api", "", "the HTTP API of a running orchestrator, e.g. http://127.0.0.1:8080: tools and calls go through it")
	fs.DurationVar(&r.toolTimeout, "tool-timeout", 2*time.Minute, "how long one turn's tool calls may take")
}

// check validates run's own flags; the pool's are already checked.
func (r *runCmd) check() error {
	switch {
	case strings.TrimSpace(r.task) == "":
		return cli.Usagef("--task is required: orchestrator run --task \"what the agent should do\"")
	case r.maxTokens < 1:
		return cli.Usagef("--max-tokens must be at least 1")
	case r.maxIterations < 1:
		return cli.Usagef("--max-iterations must be at least 1")
	case r.toolTimeout <= 0:
		return cli.Usagef("--tool-timeout must be positive")
	case r.api != "" && r.pool.NATSURL() != "":
		return cli.Usagef("give --api or --nats-url, not both")
	}
	return nil
}

// runAgent runs the agent loop and returns the exit code.
func (r *runCmd) runAgent(ctx context.Context, env *cli.Env) int {
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		fmt.Fprintln(env.Stderr, env.Path+": ANTHROPIC_API_KEY is not set; export ANTHROPIC_API_KEY=<your key> "+
			"(and ANTHROPIC_BASE_URL to use another Messages API endpoint)")
		return cli.ExitUsage
	}
	log, err := r.pool.Logger(env.Stderr)
	if err != nil {
		fmt.Fprintln(env.Stderr, env.Path+":", err)
		return cli.ExitUsage
	}
	a := &agentRun{loop: r.newLoop(key, log), task: r.task}
	setupErr, err := r.start(ctx, log, a)
	if err != nil {
		fmt.Fprintln(env.Stderr, env.Path+":", err)
		return cli.ExitUsage
	}
	if setupErr != nil && !a.started {
		fmt.Fprintln(env.Stderr, env.Path+": no pool to run the tools on:", setupErr)
		return cli.ExitUsage
	}
	return report(env, a.res, a.err, r.maxIterations)
}

// newLoop is the agent loop of the flags, on the Messages API with key.
func (r *runCmd) newLoop(key string, log *slog.Logger) *agent.Loop {
	model := anthropic.NewClient(option.WithAPIKey(key)) // ANTHROPIC_BASE_URL is read by the SDK
	return &agent.Loop{
		Client:        &model.Messages,
		Model:         anthropic.Model(r.model),
		MaxTokens:     r.maxTokens,
		MaxIterations: r.maxIterations,
		System:        r.system,
		Session:       r.session,
		ToolTimeout:   r.toolTimeout,
		Logger:        log,
	}
}

// start runs a on the HTTP API of --api, or on the pool started for it.
// setupErr is what kept the pool (or a, before its loop started) from
// running; err a failure before any pool was tried.
func (r *runCmd) start(ctx context.Context, log *slog.Logger, a *agentRun) (setupErr, err error) {
	if r.api != "" {
		pool, err := client.New(r.api)
		if err != nil {
			return nil, err
		}
		return a.run(ctx, pool, pool), nil
	}
	remove, err := r.pool.TempDataDir("toolpool-run-")
	if err != nil {
		return nil, err
	}
	defer remove()
	serveErr := r.pool.Serve(ctx, log, func(ctx context.Context, orch *toolpool.Orchestrator) {
		defs := httpapi.DefinitionsFunc(func(ctx context.Context) ([]tools.Definition, error) { return orch.Definitions(ctx), nil })
		setupErr = a.run(ctx, client.NewLocal(orch, defs), defs)
	})
	if setupErr == nil {
		setupErr = serveErr
	}
	return setupErr, nil
}

// agentRun is one run of an agent loop on a task: its outcome, and
// whether the loop started (errors after that are the run's, not the
// setup's).
type agentRun struct {
	loop    *agent.Loop
	task    string
	res     agent.Result
	err     error
	started bool
}

// run lists the pool's tools through defs and runs the loop with d; its
// error is the setup's: the loop's own outcome is in res and err.
func (a *agentRun) run(ctx context.Context, d agent.Dispatcher, defs httpapi.DefinitionSource) error {
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defs0, err := defs.Definitions(tctx)
	cancel()
	if err != nil {
		return fmt.Errorf("listing the tools: %w", err)
	}
	if len(defs0) == 0 {
		return errors.New("the pool serves no tools: give --demo-tools or --tools, or start workers")
	}
	if a.loop.Tools, err = client.ToolParams(defs0); err != nil {
		return err
	}
	a.loop.Dispatcher = d
	a.started = true
	a.res, a.err = a.loop.Run(ctx, a.task)
	return nil
}

// report prints the outcome of a run and returns its exit code.
func report(env *cli.Env, res agent.Result, err error, maxIter int) int {
	switch {
	case errors.Is(err, agent.ErrMaxIterations): // stdout is for answers only
		fmt.Fprintf(env.Stderr, "%s: stopped at the iteration limit: %d model requests, and the model still asked for tools "+
			"(%d tool calls, %d failed). Raise --max-iterations or narrow the task.\n", env.Path, maxIter, res.ToolCalls, res.ToolErrors)
		return exitIterationLimit
	case err != nil:
		fmt.Fprintln(env.Stderr, env.Path+":", err)
		return cli.ExitIsError
	}
	fmt.Fprintln(env.Stdout, res.Text)
	switch res.StopReason {
	case anthropic.StopReasonMaxTokens:
		fmt.Fprintln(env.Stderr, env.Path+": the answer was cut at --max-tokens")
	case anthropic.StopReasonRefusal:
		fmt.Fprintln(env.Stderr, env.Path+": the model declined the task")
	}
	return cli.ExitOK
}
