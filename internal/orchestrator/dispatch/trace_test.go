package dispatch

import (
	"context"
	"testing"
)

func TestNewTraceparent(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		tp := NewTraceparent()
		if !ValidTraceparent(tp) {
			t.Fatalf("NewTraceparent() = %q, not valid", tp)
		}
		if seen[tp[3:35]] {
			t.Fatalf("trace id %s repeated", tp[3:35])
		}
		seen[tp[3:35]] = true
	}
}

func TestValidTraceparent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tp   string
		want bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false}, // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false}, // zero parent id
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // upper case
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false}, // unknown version
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := ValidTraceparent(tc.tp); got != tc.want {
			t.Errorf("ValidTraceparent(%q) = %v, want %v", tc.tp, got, tc.want)
		}
	}
}

func TestTraceparentContext(t *testing.T) {
	t.Parallel()
	if _, ok := TraceparentFrom(context.Background()); ok {
		t.Error("empty context has a traceparent")
	}
	tp := NewTraceparent()
	if got, ok := TraceparentFrom(WithTraceparent(context.Background(), tp)); !ok || got != tp {
		t.Errorf("TraceparentFrom = %q, %v", got, ok)
	}
	if _, ok := TraceparentFrom(WithTraceparent(context.Background(), "garbage")); ok {
		t.Error("an invalid traceparent was returned")
	}
}
