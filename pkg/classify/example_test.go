package classify_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
)

func ExampleClassify() {
	// What a tool returned: a 503 with a Retry-After, wrapped for context.
	err := fmt.Errorf("search: %w", &classify.HTTPError{
		StatusCode: http.StatusServiceUnavailable,
		Header:     http.Header{"Retry-After": {"5"}},
	})
	d := classify.Classify(err)
	fmt.Println(d.Class, d.Code, d.Retryable, d.RetryAfter)
	// Output: transient http_503 true 5s
}

func ExamplePermanent() {
	// A tool author knows this error will not go away, and says why.
	errArchived := errors.New("repo archived")
	err := classify.Permanent(classify.WithMessage(errArchived, "the repository is archived and cannot be changed"))
	d := classify.Classify(err)
	fmt.Println(d.Class, d.Retryable, errors.Is(err, errArchived))
	fmt.Println(d.Message(classify.MessageInput{Tool: "git_push", Attempts: 1}))
	// Output:
	// permanent false true
	// The tool git_push failed: the repository is archived and cannot be changed. Retrying the same call will not help; change the input or try a different approach.
}

func ExampleDecision_Message() {
	d := classify.Classify(fs.ErrNotExist)
	fmt.Println(d.Message(classify.MessageInput{Tool: "read_file", Attempts: 1}))

	d = classify.Classify(&classify.TimeoutError{After: 10 * time.Second})
	fmt.Println(d.Message(classify.MessageInput{Tool: "search_web", Attempts: 3, Timeout: 10 * time.Second, Exhausted: true}))
	// Output:
	// The tool read_file failed: the file was not found. Check the path, for example by listing the directory, and call the tool again with the right one.
	// The tool search_web did not answer within 10s (3 attempts). Retries ran out, so the call was set aside (dead-lettered). Do not call it again right away; try a different approach, such as another tool, or answer from what you know.
}

func ExamplePolicy_Decide() {
	p := classify.Policy{}.WithDefaults() // 3 attempts, 1s base, 30s max, ±25%
	now := time.Now()
	d := classify.Classify(&classify.TimeoutError{})
	for n := 1; n <= 3; n++ {
		v := p.Decide(classify.Delivery{Decision: d, Attempt: n, Now: now}, nil)
		fmt.Printf("%d %s (reason %q, delay set %v)\n", n, v.Fate, v.Reason, v.Delay > 0)
	}
	// Output:
	// 1 retry (reason "", delay set true)
	// 2 retry (reason "", delay set true)
	// 3 dead_letter (reason "exhausted", delay set false)
}

func ExampleFormatDuration() {
	for _, d := range []time.Duration{250 * time.Millisecond, 1500 * time.Millisecond, 30 * time.Second, 90 * time.Second, 2 * time.Hour} {
		fmt.Println(classify.FormatDuration(d))
	}
	// Output:
	// 250ms
	// 1.5s
	// 30s
	// 1m30s
	// 2h
}

func ExampleRepeatedFailureMessage() {
	// The dispatcher adds this to the third is_error result in a row of one
	// tool in one agent session.
	fmt.Println(classify.RepeatedFailureMessage("search_web", 3))
	// Output:
	// The tool search_web has now failed 3 times in a row in this session: stop retrying it and use a different approach.
}
