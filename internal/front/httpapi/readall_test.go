package httpapi

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAll: readAll reads what io.ReadAll reads, whatever the
// Content-Length says and however the reads come, and passes on the error
// of a body over MaxBodyBytes.
func TestReadAll(t *testing.T) {
	body := strings.Repeat("0123456789", 100)
	for _, cl := range []int64{-1, 0, 10, int64(len(body)), int64(len(body)) + 7, 1 << 40} {
		for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body)), iotest.DataErrReader(strings.NewReader(body))} {
			got, err := readAll(r, cl, 1<<20)
			if err != nil || string(got) != body {
				t.Fatalf("Content-Length %d: %d bytes, %v; want %d bytes", cl, len(got), err, len(body))
			}
		}
	}
	limited := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(body)), 100)
	_, err := readAll(limited, int64(len(body)), 100)
	if _, ok := errors.AsType[*http.MaxBytesError](err); !ok {
		t.Fatalf("a body over the limit: %v, want *http.MaxBytesError", err)
	}
	limited = http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(body)), 100)
	if _, err = readAll(limited, 50, 100); err == nil {
		t.Fatal("a body over the limit that said it was under it: no error")
	}
}

// TestReadAllClaimedLength: a Content-Length is only a claim. A body that
// declares the limit and sends a few bytes gets a buffer of at most
// maxPrealloc, not of the declared size.
func TestReadAllClaimedLength(t *testing.T) {
	got, err := readAll(strings.NewReader("{}"), 64<<20, 64<<20)
	if err != nil || string(got) != "{}" {
		t.Fatalf("readAll = %q, %v; want {}", got, err)
	}
	if cap(got) > maxPrealloc {
		t.Errorf("a body that claimed 64 MiB and sent 2 bytes got a buffer of %d bytes; want at most %d", cap(got), maxPrealloc)
	}
}
