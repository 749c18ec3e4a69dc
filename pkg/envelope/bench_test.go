package envelope

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// benchInput is a realistic tool input of about 256 bytes.
var benchInput = json.RawMessage(`{"query":"jetstream work queue retention and consumer acknowledgement semantics","max_results":10,"include_domains":["docs.nats.io","github.com"],"language":"en","safe_search":true,"time_range":{"from":"2024-01-01","to":"2025-06-30"},"page":1}`)

func benchCall() *Call {
	now := time.Date(2025, 6, 1, 10, 0, 0, 123456789, time.UTC)
	return &Call{
		ID: "toolu_01A09q90qw90lq917835lq9", Tool: "web_search", Input: benchInput,
		Session: "sess-7f3a", ReplyTo: "orch-1", CreatedAt: now, Deadline: now.Add(2 * time.Minute),
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

func benchResult() *Result {
	return &Result{
		CallID: "toolu_01A09q90qw90lq917835lq9", Tool: "web_search",
		Content:  Text(strings.Repeat("Result line with a title and a short snippet.\n", 6)), // ~280 bytes
		Attempts: 1, WorkerID: "worker-3", QueueWait: 1200 * time.Microsecond, ExecTime: 340 * time.Millisecond,
	}
}

func BenchmarkEncodeCall(b *testing.B) {
	c := benchCall()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeCall(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCall(b *testing.B) {
	data, err := EncodeCall(benchCall())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCall(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendCall encodes into a reused buffer, as a caller that keeps
// one does.
func BenchmarkAppendCall(b *testing.B) {
	c := benchCall()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendCall(buf[:0], c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeCallShared decodes without copying the input.
func BenchmarkDecodeCallShared(b *testing.B) {
	data, err := EncodeCall(benchCall())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCallShared(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeResult(b *testing.B) {
	r := benchResult()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeResult(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendResult encodes into a reused buffer.
func BenchmarkAppendResult(b *testing.B) {
	r := benchResult()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendResult(buf[:0], r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResult(b *testing.B) {
	data, err := EncodeResult(benchResult())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeResult(data); err != nil {
			b.Fatal(err)
		}
	}
}

// The encoding/json baselines show what the hand-written codec saves.

func BenchmarkEncodeCallStdlib(b *testing.B) {
	c := benchCall()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCallStdlib(b *testing.B) {
	data, err := EncodeCall(benchCall())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var c Call
		if err := json.Unmarshal(data, &c); err != nil {
			b.Fatal(err)
		}
	}
}
