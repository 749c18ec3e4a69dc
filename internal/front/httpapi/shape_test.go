package httpapi

import (
	"slices"
	"testing"
)

// Every documented format has exactly one shape, and every shape is
// documented; ?format= names them in any case, and the error for another
// name lists them.
func TestShapesAreTheFormats(t *testing.T) {
	t.Parallel()
	if len(shapes) != len(Formats) {
		t.Fatalf("%d shapes for %d formats", len(shapes), len(Formats))
	}
	for _, f := range Formats {
		n := 0
		for _, s := range shapes {
			if s.format() == f {
				n++
			}
		}
		if n != 1 {
			t.Errorf("format %s has %d shapes", f, n)
		}
		s, err := shapeNamed(string(f))
		if err != nil || s.format() != f {
			t.Errorf("shapeNamed(%s) = %v, %v", f, s, err)
		}
		if s.expects() == "" {
			t.Errorf("shape %s expects nothing", f)
		}
	}
	if !slices.Contains(shapes, defaultShape) {
		t.Error("the default shape is not a shape")
	}
	if s, err := shapeNamed("OpenAI"); err != nil || s.format() != FormatOpenAI {
		t.Errorf(`shapeNamed("OpenAI") = %v, %v`, s, err)
	}
	if s, err := shapeNamed(""); s != nil || err != nil {
		t.Errorf(`shapeNamed("") = %v, %v`, s, err)
	}
	_, err := shapeNamed("claude")
	if want := `format "claude": want anthropic, openai, responses or gemini`; err == nil || err.Error() != want {
		t.Errorf("shapeNamed(claude) = %v, want %s", err, want)
	}
}
