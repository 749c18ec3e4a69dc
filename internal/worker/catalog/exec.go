package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// pipeDrainWait bounds the wait for a command's output pipes to close once
// its process group is gone: a process that left the group (setsid) may
// still hold them. Output the command left unread in a pipe extends the
// wait, by pipeDrainWait at a time up to pipeDrainMax: its readers were
// not scheduled yet (a worker process starved of CPU), and closing the
// pipe under them would drop the command's output.
const (
	pipeDrainWait = time.Second
	pipeDrainMax  = 30 * time.Second
)

// command is the handler of an exec tool.
type command struct {
	argv  []string
	env   []string
	dir   string
	grace time.Duration
	max   int
}

func newCommand(e *Entry, lookupEnv func(string) (string, bool)) *command {
	c := e.Exec
	env := make([]string, 0, len(c.Env)+1)
	pathListed := false
	for _, name := range c.Env {
		if name == "PATH" {
			pathListed = true
		}
		if v, ok := lookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	if !pathListed {
		env = append(env, "PATH="+PathDefault)
	}
	return &command{argv: c.Command, env: env, dir: c.Dir, grace: c.TermGrace, max: c.MaxOutputBytes}
}

// Variables an exec tool's command gets for each attempt, as a webhook
// gets its headers: the same on every attempt but EnvAttempt.
const (
	EnvCallID      = "TOOLPOOL_CALL_ID" // the call's id (the model's tool_use_id)
	EnvAttempt     = "TOOLPOOL_ATTEMPT" // the attempt number, from 1
	EnvTraceparent = "TRACEPARENT"      // the W3C trace context, as OpenTelemetry's environment carrier names it
)

// callEnv is env with the attempt's variables (EnvCallID, EnvAttempt,
// EnvTraceparent) appended: later entries win, so a listed variable of
// the same name does not reach the command. A value holding a NUL byte,
// which no environment can carry, is left out.
func callEnv(ctx context.Context, env []string) []string {
	ci, ok := tools.CallInfoFrom(ctx)
	if !ok {
		return env
	}
	out := make([]string, len(env), len(env)+3)
	copy(out, env)
	add := func(name, v string) {
		if v != "" && strings.IndexByte(v, 0) < 0 {
			out = append(out, name+"="+v)
		}
	}
	add(EnvCallID, ci.ID)
	if ci.Attempt > 0 {
		add(EnvAttempt, strconv.Itoa(ci.Attempt))
	}
	add(EnvTraceparent, ci.Traceparent)
	return out
}

// run executes the command with input on its stdin. The process runs in a
// process group of its own (startCommand: on Linux the group dies with the
// worker process too); when the attempt's context ends the group gets
// SIGTERM, then SIGKILL after the grace, and once the command exits whatever
// it left running in its group is killed.
func (c *command) run(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	if err := ctx.Err(); err != nil {
		return tools.Output{}, err
	}
	p, err := openPipes()
	if err != nil {
		return tools.Output{}, startError(err)
	}
	defer p.close()
	cmd := &exec.Cmd{
		Path: c.argv[0], Args: c.argv, Env: callEnv(ctx, c.env), Dir: c.dir,
		Stdin: p.stdinR, Stdout: p.stdoutW, Stderr: p.stderrW,
	}
	release, err := startCommand(cmd)
	if err != nil {
		return tools.Output{}, startError(err)
	}
	p.started()
	pgid := cmd.Process.Pid

	go func() {
		_, _ = p.stdinW.Write(input) // EPIPE when the command does not read it all
		_ = p.stdinW.Close()
	}()
	stdout := &headBuffer{max: c.max}
	stderr := &tailBuffer{max: StderrTailBytes}
	read := p.read(stdout, stderr)
	waitErr, stopped := c.wait(ctx, cmd, pgid)
	// The command is gone; nothing it started outlives the call.
	signalGroup(pgid, sigKill)
	release()
	p.drain(read)

	if stopped {
		return tools.Output{}, fmt.Errorf("command stopped when its time ran out: %w", ctx.Err())
	}
	if waitErr == nil {
		text := strings.ToValidUTF8(string(stdout.head), "\uFFFD")
		return tools.Text(envelope.TruncateHead(text, stdout.total, c.max)), nil
	}
	return tools.Output{}, exitError(waitErr, stderr.String())
}

// wait waits for the command to exit. When ctx ends first, its process
// group gets SIGTERM, then SIGKILL after the grace, and stopped is true.
func (c *command) wait(ctx context.Context, cmd *exec.Cmd, pgid int) (waitErr error, stopped bool) {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case waitErr = <-waited:
		return waitErr, false
	case <-ctx.Done():
	}
	signalGroup(pgid, sigTerm)
	t := time.NewTimer(c.grace)
	defer t.Stop()
	select {
	case waitErr = <-waited:
	case <-t.C:
		signalGroup(pgid, sigKill)
		waitErr = <-waited
	}
	return waitErr, true
}

// pipes are a command's stdin, stdout and stderr: os.Pipe pairs, so that
// the command's own output is read while it runs and its process group
// can be signalled without a shell in between.
type pipes struct {
	stdinR, stdinW   *os.File
	stdoutR, stdoutW *os.File
	stderrR, stderrW *os.File
}

// openPipes makes the three pipes; on failure it closes those it made.
func openPipes() (*pipes, error) {
	var p pipes
	for _, ends := range [][2]**os.File{{&p.stdinR, &p.stdinW}, {&p.stdoutR, &p.stdoutW}, {&p.stderrR, &p.stderrW}} {
		r, w, err := os.Pipe()
		if err != nil {
			p.close()
			return nil, err
		}
		*ends[0], *ends[1] = r, w
	}
	return &p, nil
}

// started closes the ends the started command has its own copies of.
func (p *pipes) started() {
	_ = p.stdinR.Close()
	_ = p.stdoutW.Close()
	_ = p.stderrW.Close()
}

// read copies the command's stdout and stderr into out and errOut until
// their pipes close; Wait the group returned.
func (p *pipes) read(out, errOut io.Writer) *sync.WaitGroup {
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(out, p.stdoutR) })
	readers.Go(func() { _, _ = io.Copy(errOut, p.stderrR) })
	return &readers
}

// drain waits for the readers to reach the end of the output pipes, once
// the command's process group is gone: for pipeDrainWait, as a process
// that left the group (setsid) may still hold them; longer while a pipe
// holds output not read yet (up to pipeDrainMax). Then the pipes are
// closed under the readers, which keep what they had read.
func (p *pipes) drain(readers *sync.WaitGroup) {
	defer func() { _ = p.stdinW.Close() }()
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	t := time.NewTimer(pipeDrainWait)
	defer t.Stop()
	for waited := pipeDrainWait; ; waited += pipeDrainWait {
		select {
		case <-drained:
			return
		case <-t.C:
		}
		if waited >= pipeDrainMax || !(unread(p.stdoutR) || unread(p.stderrR)) {
			break
		}
		t.Reset(pipeDrainWait)
	}
	_ = p.stdoutR.Close()
	_ = p.stderrR.Close()
	<-drained
}

// close closes every end (those closed already are no matter).
func (p *pipes) close() {
	for _, f := range []*os.File{p.stdinR, p.stdinW, p.stdoutR, p.stdoutW, p.stderrR, p.stderrW} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// startError is a command that could not be started: a permanent error
// (the catalog or the machine needs fixing, not the call).
func startError(err error) error {
	return classify.Permanent(classify.WithMessage(err, "its program could not be started on the worker"))
}

// exitError classifies a command that exited unsuccessfully: exit status 75
// (EX_TEMPFAIL) is transient, anything else permanent; the model is shown
// the end of stderr.
func exitError(err error, stderrTail string) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return classify.Permanent(classify.WithMessage(err, "its program failed on the worker"))
	}
	var msg string
	code := ee.ExitCode()
	switch {
	case code == ExitTempFail:
		msg = fmt.Sprintf("its program reported a temporary failure (exit status %d)", code)
	case code >= 0:
		msg = fmt.Sprintf("its program exited with status %d", code)
	default:
		msg = "its program was killed by a signal (" + exitSignal(ee) + ")"
	}
	if tail := cleanTail(stderrTail); tail != "" {
		msg += ". Its error output ends with:\n" + tail
	}
	err = classify.WithMessage(err, msg)
	if code == ExitTempFail {
		return classify.Transient(err)
	}
	return classify.Permanent(err)
}

// cleanTail makes the end of stderr fit for the model: valid UTF-8, no
// control characters but newlines and tabs, trimmed.
func cleanTail(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return -1
	}, s)
	return strings.TrimSpace(s)
}

// headBuffer keeps the first max bytes written to it and counts the rest:
// the command is never blocked on a full pipe.
type headBuffer struct {
	max   int
	head  []byte
	total int
}

func (b *headBuffer) Write(p []byte) (int, error) {
	if room := b.max - len(b.head); room > 0 {
		b.head = append(b.head, p[:min(room, len(p))]...)
	}
	b.total += len(p)
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
	cut bool // bytes were dropped from the front
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.cut = true
	}
	return len(p), nil
}

// String is the tail, starting at a line or rune boundary when it was cut.
func (b *tailBuffer) String() string {
	s := string(b.buf)
	if b.cut {
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		s = "…" + strings.TrimLeftFunc(s, func(r rune) bool { return r == unicode.ReplacementChar })
	}
	return s
}
