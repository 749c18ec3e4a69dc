package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// clockSlack covers the difference between the clocks that stamp the end
// of an attempt (this process) and time the NAK delay (the server).
const clockSlack = 10 * time.Millisecond

// schedulingAllowance is how late a redelivery may come on a shared, noisy
// machine running the race detector.
const schedulingAllowance = 2 * time.Second

// retryEvents returns the OutcomeRetry events of metrics by attempt.
func retryEvents(t *testing.T, m *recordingMetrics) map[int]worker.Event {
	t.Helper()
	out := map[int]worker.Event{}
	for _, ev := range m.all() {
		if ev.Outcome != classify.FateRetry {
			continue
		}
		if _, dup := out[ev.Attempt]; dup {
			t.Errorf("two retry events for attempt %d", ev.Attempt)
		}
		out[ev.Attempt] = ev
	}
	return out
}

// A 429 with Retry-After raises the delay before the next attempt to at
// least that long (capped at the policy's MaxDelay), whatever the backoff
// would have been, in seconds or as an HTTP date.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter func(now time.Time) http.Header
		maxDelay   time.Duration
		want       time.Duration // the delay the worker asks of the server
	}{
		{
			name:       "seconds",
			retryAfter: func(time.Time) http.Header { return http.Header{"Retry-After": {"2"}} },
			maxDelay:   10 * time.Second,
			want:       2 * time.Second,
		},
		{
			name: "HTTP date",
			retryAfter: func(now time.Time) http.Header {
				now = now.Truncate(time.Second)
				return http.Header{
					"Date":        {now.UTC().Format(http.TimeFormat)},
					"Retry-After": {now.Add(2 * time.Second).UTC().Format(http.TimeFormat)},
				}
			},
			maxDelay: 10 * time.Second,
			want:     2 * time.Second,
		},
		{
			name:       "capped at MaxDelay",
			retryAfter: func(time.Time) http.Header { return http.Header{"Retry-After": {"120"}} },
			maxDelay:   time.Second,
			want:       time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newAttemptClock()
			tool := tools.Tool{
				Name:        "rate_limited",
				Description: "answers 429 once",
				InputSchema: anySchema,
				Timeout:     2 * time.Second,
				Retry:       classify.Policy{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: tt.maxDelay},
				Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
					n := attemptOf(ctx)
					clock.started(n)
					defer clock.ended(n)
					if n == 1 {
						return tools.Output{}, &classify.HTTPError{StatusCode: http.StatusTooManyRequests, Header: tt.retryAfter(time.Now())}
					}
					return tools.Text("ok"), nil
				},
			}
			p := newPool(t, tool)
			metrics := newRecordingMetrics()
			p.startWorker(func(c *worker.Config) { c.Metrics = metrics })

			res := p.call("rate_limited", `{}`)

			if res.IsError || res.Attempts != 2 {
				t.Fatalf("result = %+v; want success after 2 attempts", res)
			}
			gap := clock.get(2).start.Sub(clock.get(1).end)
			if gap < tt.want-clockSlack {
				t.Errorf("attempt 2 started %v after attempt 1 failed; want no sooner than %v", gap, tt.want)
			}
			if gap > tt.want+schedulingAllowance {
				t.Errorf("attempt 2 started %v after attempt 1 failed; want about %v", gap, tt.want)
			}
			eventually(t, "the retry event", func() bool { return len(retryEvents(t, metrics)) == 1 })
			if ev := retryEvents(t, metrics)[1]; ev.RetryDelay != tt.want || ev.Code != classify.CodeHTTP429 {
				t.Errorf("retry event delay, code = %v, %q; want %v, %q", ev.RetryDelay, ev.Code, tt.want, classify.CodeHTTP429)
			}
		})
	}
}

// The NAK delays the server enforces between attempts fall inside the
// policy's jitter band, min(base·2^(n-1), max)·(1±jitter); with a fixed
// random source they are exact.
func TestBackoffDelaysEnforcedByServer(t *testing.T) {
	t.Parallel()
	const (
		base   = 200 * time.Millisecond
		jitter = 0.25
	)
	policy := classify.Policy{MaxAttempts: 4, BaseDelay: base, MaxDelay: 5 * time.Second, Jitter: jitter}
	tests := []struct {
		name  string
		rand  classify.Rand   // nil: the worker's default source
		exact []time.Duration // the delays after attempts 1..3, when rand is fixed
	}{
		{name: "random jitter"},
		// 1 + 0.25·(2·0.75-1) = 1.125, exact in binary.
		{name: "fixed rand", rand: fixedRand(0.75), exact: []time.Duration{225 * time.Millisecond, 450 * time.Millisecond, 900 * time.Millisecond}},
		// The bottom of the band: 1 + 0.25·(2·0-1) = 0.75.
		{name: "fixed rand at the bottom", rand: fixedRand(0), exact: []time.Duration{150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newAttemptClock()
			tool := tools.Tool{
				Name:        "unsteady",
				Description: "fails transiently three times",
				InputSchema: anySchema,
				Timeout:     2 * time.Second,
				Retry:       policy,
				Handler: func(ctx context.Context, _ json.RawMessage) (tools.Output, error) {
					n := attemptOf(ctx)
					clock.started(n)
					defer clock.ended(n)
					if n <= 3 {
						return tools.Output{}, classify.Transient(errors.New("upstream hiccup " + strconv.Itoa(n)))
					}
					return tools.Text("ok"), nil
				},
			}
			p := newPool(t, tool)
			metrics := newRecordingMetrics()
			p.startWorker(func(c *worker.Config) {
				c.Metrics = metrics
				if tt.rand != nil {
					c.Rand = tt.rand
				}
			})

			res := p.call("unsteady", `{}`)

			if res.IsError || res.Attempts != 4 {
				t.Fatalf("result = %+v; want success after 4 attempts", res)
			}
			eventually(t, "three retry events", func() bool { return len(retryEvents(t, metrics)) == 3 })
			events := retryEvents(t, metrics)
			for n := 1; n <= 3; n++ {
				nominal := base << (n - 1) // below MaxDelay for n <= 3
				lower := time.Duration(float64(nominal) * (1 - jitter))
				upper := time.Duration(float64(nominal) * (1 + jitter))
				delay := events[n].RetryDelay
				if delay < lower || delay > upper {
					t.Errorf("attempt %d: worker asked for a delay of %v, outside the band [%v, %v]", n, delay, lower, upper)
				}
				if tt.exact != nil && delay != tt.exact[n-1] {
					t.Errorf("attempt %d: delay %v, want exactly %v with a fixed rand", n, delay, tt.exact[n-1])
				}
				gap := clock.get(n + 1).start.Sub(clock.get(n).end)
				if gap < lower-clockSlack {
					t.Errorf("attempt %d started %v after attempt %d ended: below the band's lower bound %v", n+1, gap, n, lower)
				}
				if gap < delay-clockSlack {
					t.Errorf("attempt %d started %v after attempt %d ended: sooner than the delay asked for, %v", n+1, gap, n, delay)
				}
				if gap > upper+schedulingAllowance {
					t.Errorf("attempt %d started %v after attempt %d ended: far above the band's upper bound %v", n+1, gap, n, upper)
				}
			}
		})
	}
}
