package catalog

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// slowWriter is an output buffer whose first Write blocks until release
// is closed: a reader goroutine that is not scheduled for a while, as in a
// worker process starved of CPU.
type slowWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered); <-w.release })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestDrainKeepsOutputLeftInThePipe: a command's output still unread in
// its pipe when the drain's first wait runs out used to be dropped (the
// pipe was closed under its reader): an exec tool answered an empty
// success under load. The drain now waits while output is left unread.
func TestDrainKeepsOutputLeftInThePipe(t *testing.T) {
	t.Parallel()
	p, err := openPipes()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	out := &slowWriter{entered: make(chan struct{}), release: make(chan struct{})}
	if _, err := p.stdoutW.WriteString("first "); err != nil {
		t.Fatal(err)
	}
	readers := p.read(out, &bytes.Buffer{})
	<-out.entered // the reader holds "first " and is stuck in Write
	if _, err := p.stdoutW.WriteString("and the rest"); err != nil {
		t.Fatal(err)
	}
	if !unread(p.stdoutR) {
		t.Fatal("unread: the pipe holding 12 bytes reads as empty")
	}
	// The command is gone: its ends of the pipes are closed.
	_ = p.stdoutW.Close()
	_ = p.stderrW.Close()
	_ = p.stdinR.Close()
	go func() {
		time.Sleep(pipeDrainWait + pipeDrainWait/2) // past the first wait
		close(out.release)
	}()
	p.drain(readers)
	if got := out.buf.String(); got != "first and the rest" {
		t.Errorf("output %q; want all of it", got)
	}
}

// TestDrainGivesUpOnAnEmptyPipeHeldOpen: a process that left the group
// may hold the pipe open without writing; the drain ends after its wait.
func TestDrainGivesUpOnAnEmptyPipeHeldOpen(t *testing.T) {
	t.Parallel()
	p, err := openPipes()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var out bytes.Buffer
	if _, err := p.stdoutW.WriteString("said"); err != nil {
		t.Fatal(err)
	}
	readers := p.read(&out, &bytes.Buffer{})
	// stdoutW stays open: someone else still holds it.
	start := time.Now()
	p.drain(readers)
	if d := time.Since(start); d < pipeDrainWait {
		t.Errorf("drain returned after %v, before its wait of %v", d, pipeDrainWait)
	}
	if out.String() != "said" {
		t.Errorf("output %q; want what was written", out.String())
	}
}
