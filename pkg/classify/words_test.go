package classify

import (
	"strings"
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"},
		{0, "0s"},
		{250 * time.Millisecond, "250ms"},
		{999 * time.Millisecond, "999ms"},
		{999*time.Millisecond + 900*time.Microsecond, "1s"},
		{time.Second, "1s"},
		{1500 * time.Millisecond, "1.5s"},
		{9949 * time.Millisecond, "9.9s"},
		{9960 * time.Millisecond, "10s"},
		{10 * time.Second, "10s"},
		{10400 * time.Millisecond, "10s"},
		{30 * time.Second, "30s"},
		{59*time.Second + 400*time.Millisecond, "59s"},
		{59600 * time.Millisecond, "1m"},
		{time.Minute, "1m"},
		{70 * time.Second, "1m10s"},
		{90 * time.Second, "1m30s"},
		{2 * time.Minute, "2m"},
		{10 * time.Minute, "10m"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{time.Hour + 5*time.Second, "1h0m5s"},
		{2 * time.Hour, "2h"},
	}
	for _, tc := range tests {
		if got := FormatDuration(tc.d); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int{
		0:                       1,
		100 * time.Millisecond:  1,
		time.Second:             1,
		1500 * time.Millisecond: 2,
		3 * time.Second:         3,
	} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// The sentences toolpool writes for the model besides Decision.Message, as
// the model reads them.
func TestWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, got, want string
	}{
		{"repeated failure", RepeatedFailureMessage("flaky", 3),
			"The tool flaky has now failed 3 times in a row in this session: stop retrying it and use a different approach."},
		{"no worker", NoWorkerMessage("paused", []string{"read_file", "echo", "echo"}),
			"No worker serves the tool paused right now, so the call was not run. It may be back soon: try again later, or use a different approach. " +
				"Tools available now: echo, read_file."},
		{"no worker, no tools", NoWorkerMessage("x", nil),
			"No worker serves the tool x right now, so the call was not run. It may be back soon: try again later, or use a different approach. " +
				"No tools are available right now."},
		{"no result", NoResultMessage("echo", 30*time.Second),
			"The tool echo returned no result within 30s; it may still be running. Try again later or use a different approach."},
		{"saturated, in flight", SaturatedMessage(Saturation{Tool: "echo", RetryAfter: 1500 * time.Millisecond}),
			"The call to echo was not run: the tool pool is saturated (the tool pool has too many calls in flight). Try the call again in 2s, or answer from what you know."},
		{"saturated, queued", SaturatedMessage(Saturation{Tool: "echo", Busy: "slow", RetryAfter: time.Second}),
			"The call to echo was not run: the tool pool is saturated (too many calls are waiting for slow). Try the call again in 1s, or answer from what you know."},
		{"saturated, queue wait", SaturatedMessage(Saturation{Tool: "echo", Busy: "slow", Wait: 42 * time.Second, Left: 5 * time.Second, RetryAfter: 37 * time.Second}),
			"The call to echo was not run: the tool pool is saturated: slow is busy, with about 42s of queued work, more than this call's timeout (5s). Try the call again in 37s, or use another approach."},
		{"held by the cap", HeldMessage(Held{Tool: "search", Reason: HeldConcurrency, Key: "your account", Concurrency: 8, Waited: 30 * time.Second, RetryAfter: 2500 * time.Millisecond}),
			"The call to search was not run: your account may have at most 8 calls to search running at once (a concurrency limit), and it had that many for the 30s the call waited. " +
				"The limit is temporary: try the call again in 3s, or make fewer calls to search at once."},
		{"held by the rate", HeldMessage(Held{Tool: "search", Reason: HeldRate, Rate: 50, Per: time.Second, Waited: 10 * time.Second, RetryAfter: time.Second}),
			"The call to search was not run: this caller may start at most 50 calls to search per second (a rate limit), and had used them up for the 10s the call waited. " +
				"The limit is temporary: try the call again in 1s, or make fewer calls to search."},
		{"held by a cap of 1", HeldMessage(Held{Tool: "deploy", Reason: HeldConcurrency, Key: "this session", Concurrency: 1, Waited: 5 * time.Second, RetryAfter: 20 * time.Second}),
			"The call to deploy was not run: this session may have at most 1 call to deploy running at once (a concurrency limit), and it had that many for the 5s the call waited. " +
				"The limit is temporary: try the call again in 20s, or make fewer calls to deploy at once."},
		{"held by a rate per minute", HeldMessage(Held{Tool: "search", Reason: HeldRate, Key: "calls with this repo", Rate: 1, Per: time.Minute, Waited: 2 * time.Second, RetryAfter: 58 * time.Second}),
			"The call to search was not run: calls with this repo may start at most 1 call to search per minute (a rate limit), and had used them up for the 2s the call waited. " +
				"The limit is temporary: try the call again in 58s, or make fewer calls to search."},
		{"held by fair share", HeldMessage(Held{Tool: "search", Waited: 30 * time.Second, RetryAfter: 4 * time.Second}),
			"The call to search was not run: every slot of the tool was busy with other calls (its slots are shared fairly between callers) for the 30s it waited for its turn. This is temporary: try the call again in 4s, or use a different approach."},
		{"missing id", MissingIDMessage("echo"),
			"The call to echo has no tool_use id, so it was not run: every tool_use block needs a unique id."},
		{"refused field", RefusedFieldMessage("echo", "id", "is 300 bytes; the limit is 256"),
			"The call to echo was not run: its id is 300 bytes; the limit is 256. Call the tool again with a valid id."},
		{"refused field the model cannot fix", RefusedFieldMessage("echo", "session", "is 300 bytes; the limit is 256"),
			"The call to echo could not be prepared and was not run. This was not caused by your input; try a different approach or answer from what you know."},
		{"not prepared", NotPreparedMessage("echo"),
			"The call to echo could not be prepared and was not run. This was not caused by your input; try a different approach or answer from what you know."},
		{"call type", UnsupportedCallTypeMessage("custom"),
			`This tool call is of type "custom", which this tool pool does not run: it runs function tools only. Call one of the function tools instead.`},
		{"arguments", InvalidArgumentsMessage("echo", "unexpected end of JSON input"),
			"The arguments of this call to echo are not valid JSON (unexpected end of JSON input), so it was not run. Call echo again with arguments that are one JSON object."},
		{"arguments not an object", ArgumentsNotObjectMessage("echo", "an array"),
			"The arguments of this call to echo are an array, not a JSON object, so it was not run. Call echo again with arguments that are one JSON object."},
		{"pool unavailable", PoolUnavailableMessage("echo"),
			"The tool pool could not take this call to echo right now, so it was not run. Call it again in a moment, or answer from what you know."},
		{"shutting down", ShuttingDownMessage("echo"),
			"The tool pool is restarting, so this call to echo was not run. Call it again in a moment."},
		{"poison", PoisonMessage("crash", 5),
			"The tool crash stopped the worker running it on each of 5 attempts, before it could answer, so the call was set aside. " +
				"Do not call it again with the same input; try a different approach or answer from what you know."},
		{"expired", ExpiredMessage("slow", 12*time.Second),
			"The call to slow waited 12s in the queue and its deadline passed before any worker could start it, so it was not run. " +
				"The tool is busy; try again later or use a different approach."},
		{"outcome unknown", OutcomeUnknownMessage("send_mail"),
			"The outcome of this call to send_mail is unknown: the worker running it stopped before it reported whether the call took effect, " +
				"and send_mail is not safe to run twice, so it was not run again. Before calling it again, check whether its effect happened " +
				"(for example, read back what it was meant to change or create); call it again only if it did not."},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
		for _, bad := range forbidden {
			if strings.Contains(tc.got, bad) {
				t.Errorf("%s: %q in model text %q", tc.name, bad, tc.got)
			}
		}
		if strings.Contains(tc.got, "..") || strings.Contains(tc.got, "  ") || !strings.HasSuffix(tc.got, ".") {
			t.Errorf("%s: badly punctuated: %q", tc.name, tc.got)
		}
	}
}
