package proctest

import (
	"sync"
	"testing"
)

func TestRows(t *testing.T) {
	var r Rows
	if got := r.Table("| h |\n|---|\n"); got != "" {
		t.Fatalf("Table of no rows = %q, want empty", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { r.Add("| x |") })
	}
	wg.Wait()
	want := "| h |\n|---|\n| x |\n| x |\n| x |\n| x |\n| x |\n| x |\n| x |\n| x |"
	if got := r.Table("| h |\n|---|\n"); got != want {
		t.Fatalf("Table = %q, want %q", got, want)
	}
}
