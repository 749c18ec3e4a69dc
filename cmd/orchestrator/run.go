package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

// runFlags are run's own flags; the pool's are serve's.
type runFlags struct {
	task          string
	model         string
	maxTokens     int64
	maxIterations int
	system        string
	session       string
	api           string
	toolTimeout   time.Duration
}

// runCommand is "orchestrator run".
func runCommand() *cli.Command {
	f, r := &serveFlags{}, &runFlags{}
	return &cli.Command{
		Name:    "run",
		Args:    `--task "…" [flags]`,
		Summary: "an agent loop on the Anthropic Messages API, its tool calls run on the pool",
		Help:    runHelp,
		Flags: func(fs *flag.FlagSet) {
			f.register(fs)
			r.register(fs)
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			if err := f.check(env.Given); err != nil {
				return err
			}
			if err := r.check(f); err != nil {
				return err
			}
			return cli.Exit(runAgent(ctx, f, r, env.Stdout, env.Stderr))
		},
	}
}

// register adds run's own flags to fs, after the pool's, and changes the
// pool's defaults for a one-off run.
func (r *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.task, "task", "", "the task for the agent (required)")
	fs.StringVar(&r.model, "model", string(agent.ModelDefault), "the model")
	fs.Int64Var(&r.maxTokens, "max-tokens", agent.MaxTokensDefault, "the most tokens of each model answer")
	fs.IntVar(&r.maxIterations, "max-iterations", agent.MaxIterationsDefault, "the most model requests; reaching it with tools still called exits 3")
	fs.StringVar(&r.system, "system", "", "the system prompt")
	fs.StringVar(&r.session, "session", "", "the agent session id, which scopes the pool's advice against retrying a failing tool (default random)")
	fs.StringVar(&r.api, "api", "", "the HTTP API of a running orchestrator, e.g. http://127.0.0.1:8080: tools and calls go through it")
	fs.DurationVar(&r.toolTimeout, "tool-timeout", 2*time.Minute, "how long one turn's tool calls may take")
	oneOff(fs) // a run is a one-off
}

// check validates run's own flags; f are the pool's, already checked.
func (r *runFlags) check(f *serveFlags) error {
	switch {
	case strings.TrimSpace(r.task) == "":
		return cli.Usagef("--task is required: orchestrator run --task \"what the agent should do\"")
	case r.maxTokens < 1:
		return cli.Usagef("--max-tokens must be at least 1")
	case r.maxIterations < 1:
		return cli.Usagef("--max-iterations must be at least 1")
	case r.toolTimeout <= 0:
		return cli.Usagef("--tool-timeout must be positive")
	case r.api != "" && f.nats.URL() != "":
		return cli.Usagef("give --api or --nats-url, not both")
	}
	return nil
}

// runAgent runs the agent loop of run and returns the exit code.
func runAgent(ctx context.Context, f *serveFlags, r *runFlags, stdout, stderr io.Writer) int {
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		fmt.Fprintln(stderr, "orchestrator run: ANTHROPIC_API_KEY is not set; export ANTHROPIC_API_KEY=<your key> "+
			"(and ANTHROPIC_BASE_URL to use another Messages API endpoint)")
		return cli.ExitUsage
	}
	log, err := f.log.Logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "orchestrator run:", err)
		return cli.ExitUsage
	}
	model := anthropic.NewClient(option.WithAPIKey(key)) // ANTHROPIC_BASE_URL is read by the SDK
	loop := &agent.Loop{
		Client:        &model.Messages,
		Model:         anthropic.Model(r.model),
		MaxTokens:     r.maxTokens,
		MaxIterations: r.maxIterations,
		System:        r.system,
		Session:       r.session,
		ToolTimeout:   r.toolTimeout,
		Logger:        log,
	}

	var (
		res     agent.Result
		loopErr error
		started bool // the loop ran: errors after this are the run's, not the setup's
	)
	runLoop := func(ctx context.Context, d agent.Dispatcher, defs httpapi.DefinitionSource) error {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defs0, err := defs.Definitions(tctx)
		cancel()
		if err != nil {
			return fmt.Errorf("listing the tools: %w", err)
		}
		if len(defs0) == 0 {
			return errors.New("the pool serves no tools: give --demo-tools or --tools, or start workers")
		}
		if loop.Tools, err = client.ToolParams(defs0); err != nil {
			return err
		}
		loop.Dispatcher = d
		started = true
		res, loopErr = loop.Run(ctx, r.task)
		return nil
	}

	var setupErr error
	if r.api != "" {
		pool, err := client.New(r.api)
		if err != nil {
			fmt.Fprintln(stderr, "orchestrator run:", err)
			return cli.ExitUsage
		}
		setupErr = runLoop(ctx, pool, pool)
	} else {
		remove, err := f.useTempDataDir("toolpool-run-")
		if err != nil {
			fmt.Fprintln(stderr, "orchestrator run:", err)
			return cli.ExitUsage
		}
		defer remove()
		f.ready = func(ctx context.Context, orch *toolpool.Orchestrator) {
			defs := httpapi.DefinitionsFunc(func(ctx context.Context) ([]tools.Definition, error) { return orch.Definitions(ctx), nil })
			setupErr = runLoop(ctx, client.NewLocal(orch, defs), defs)
		}
		if err := runServe(ctx, f, log); err != nil && setupErr == nil {
			setupErr = err
		}
	}
	if setupErr != nil && !started {
		fmt.Fprintln(stderr, "orchestrator run: no pool to run the tools on:", setupErr)
		return cli.ExitUsage
	}
	return report(res, loopErr, r.maxIterations, stdout, stderr)
}

// report prints the outcome of a run and returns its exit code.
func report(res agent.Result, err error, maxIter int, stdout, stderr io.Writer) int {
	switch {
	case errors.Is(err, agent.ErrMaxIterations): // stdout is for answers only
		fmt.Fprintf(stderr, "orchestrator run: stopped at the iteration limit: %d model requests, and the model still asked for tools "+
			"(%d tool calls, %d failed). Raise --max-iterations or narrow the task.\n", maxIter, res.ToolCalls, res.ToolErrors)
		return exitIterationLimit
	case err != nil:
		fmt.Fprintln(stderr, "orchestrator run:", err)
		return cli.ExitIsError
	}
	fmt.Fprintln(stdout, res.Text)
	switch res.StopReason {
	case anthropic.StopReasonMaxTokens:
		fmt.Fprintln(stderr, "orchestrator run: the answer was cut at --max-tokens")
	case anthropic.StopReasonRefusal:
		fmt.Fprintln(stderr, "orchestrator run: the model declined the task")
	}
	return cli.ExitOK
}
