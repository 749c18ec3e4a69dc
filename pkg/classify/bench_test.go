package classify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"syscall"
	"testing"
	"time"
)

// benchErrors is a mix of what tools return, from cheap to the worst case (an
// unknown error walks every check).
func benchErrors() []error {
	return []error{
		fmt.Errorf("search: %w", context.DeadlineExceeded),
		&url.Error{Op: "Get", URL: secretURL, Err: dialErr(syscall.ECONNREFUSED)},
		httpErr(503),
		httpErr(429, "Retry-After", "7"),
		httpErr(404),
		&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT},
		Transient(errors.New("flaky")),
		Permanent(context.DeadlineExceeded),
		ioErr("read", syscall.ECONNRESET),
		errors.New("something odd"),
	}
}

func BenchmarkClassify(b *testing.B) {
	errs := benchErrors()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = Classify(errs[i%len(errs)])
		i++
	}
}

func BenchmarkClassifyEach(b *testing.B) {
	for _, err := range benchErrors() {
		b.Run(Classify(err).Code, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Classify(err)
			}
		})
	}
}

func BenchmarkDecide(b *testing.B) {
	p := Policy{}.WithDefaults()
	d := Classify(&TimeoutError{})
	now := time.Now()
	deadline := now.Add(time.Minute)
	rnd := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		_ = p.Decide(Delivery{Decision: d, Attempt: n%4 + 1, Now: now, Deadline: deadline}, rnd)
		n++
	}
}

func BenchmarkDelay(b *testing.B) {
	p := Policy{}.WithDefaults()
	rnd := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		_ = p.Delay(n%8+1, 0, rnd)
		n++
	}
}

func BenchmarkMessage(b *testing.B) {
	ds := []Decision{
		Classify(&TimeoutError{}),
		Classify(httpErr(429, "Retry-After", "30")),
		Classify(fs.ErrNotExist),
		Classify(&ValidationError{Fields: []FieldError{{"query", "is required"}, {"max_results", "must be <= 50"}}}),
	}
	in := MessageInput{Tool: "search_web", Attempts: 3, Timeout: 10 * time.Second, Exhausted: true}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = ds[i%len(ds)].Message(in)
		i++
	}
}
