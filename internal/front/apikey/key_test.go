package apikey

import (
	"context"
	"testing"
)

// A key put in a context is read back; a context without one, or with a
// nil one, has none.
func TestContext(t *testing.T) {
	t.Parallel()
	k := &Key{Tenant: "a"}
	if got, ok := FromContext(NewContext(context.Background(), k)); !ok || got != k {
		t.Errorf("FromContext = %v, %v", got, ok)
	}
	if got, ok := FromContext(context.Background()); ok || got != nil {
		t.Errorf("no key: %v, %v", got, ok)
	}
	if _, ok := FromContext(NewContext(context.Background(), nil)); ok {
		t.Error("a nil key was found")
	}
}
