package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// serverProfiles takes CPU profiles of the servers over a measured phase
// (--server-profiles).
type serverProfiles struct {
	dir     string // "" for none
	seconds int
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
}

// start asks every node for a CPU profile of the next seconds, written to
// dir/<label>-<node>.prof.
func (p *serverProfiles) start(ctx context.Context, c *cluster, label string) {
	if p.dir == "" {
		return
	}
	for _, n := range c.nodes {
		p.wg.Go(func() {
			path := filepath.Join(p.dir, label+"-"+n.name+".prof")
			if err := fetchProfile(ctx, n.prof, p.seconds, path); err != nil {
				p.mu.Lock()
				p.errs = append(p.errs, fmt.Errorf("CPU profile of %s: %w", n.name, err))
				p.mu.Unlock()
			}
		})
	}
}

// wait waits for the profiles started and reports the first failure.
func (p *serverProfiles) wait() error {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) > 0 {
		return p.errs[0]
	}
	return nil
}

func fetchProfile(ctx context.Context, addr string, seconds int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
