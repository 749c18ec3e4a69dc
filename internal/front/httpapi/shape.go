package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Format is the wire format of a POST /v1/tool_calls request and its
// answer: the name of a shape (FormatAnthropic, FormatOpenAI,
// FormatResponses, FormatGemini).
type Format string

// Formats lists the formats, in the order the documentation names them.
var Formats = []Format{FormatAnthropic, FormatOpenAI, FormatResponses, FormatGemini}

// shape is one wire shape: how a model API's assistant turn looks, how
// the answer to it must look, and how that API wants tools described.
// Each lives in a file of its own (shape_anthropic.go, …) and is listed
// in shapes; a new model API is one more.
type shape interface {
	// format is the shape's name: the value of ?format= and of the
	// Toolpool-Format header.
	format() Format
	// expects says what a body of the shape is, for the 400 of a body
	// forced into the shape (?format=) that is clearly of another.
	expects() string
	// claimItem reports whether the element at position i of a bare
	// array body is of the shape, and what it looks like ("Anthropic
	// content blocks (a tool_use block at [0])").
	claimItem(it arrayItem, i int) (what string, ok bool)
	// claimObject says whether an object body is of the shape (mine,
	// with what it looks like), could be of the shape or another
	// (undecided: no further shape is asked) or is not (notMine).
	claimObject(msg map[string]json.RawMessage) (what string, c claim)
	// refuseObject is the 400 of an object body that no shape claimed
	// and that is one piece of a turn of the shape rather than the turn
	// (the answer to it would not be what the agent appends); nil
	// otherwise.
	refuseObject(msg map[string]json.RawMessage) error
	// parseArray reads a bare array body: the shape's list of calls.
	parseArray(items []json.RawMessage, maxCalls int) (*turn, error)
	// parseObject reads an object body; forced says ?format= named the
	// shape.
	parseObject(msg map[string]json.RawMessage, forced bool, maxCalls int) (*turn, error)
	// answer is the answer to t, one result per call in t's order, as a
	// value to encode as JSON.
	answer(t *turn, results []envelope.Result) any
	// toolList is the answer to GET /v1/tools?format=, defs sorted by
	// name, as a value to encode as JSON.
	toolList(defs []tools.Definition) any
}

// shapes are the shapes, in the order they are asked about a body whose
// shape is not forced: the first that claims it wins (its first telling
// element for an array). The order is part of the wire contract: an
// OpenAI function call with a call_id is a Chat Completions call, an
// Anthropic block with a call_id a Responses item.
var shapes = []shape{openAIShape{}, responsesShape{}, anthropicShape{}, geminiShape{}}

// defaultShape reads a body no shape claims.
var defaultShape shape = anthropicShape{}

// claim is what a shape makes of an object body.
type claim int8

const (
	notMine   claim = iota // the body is not of the shape: ask the next
	mine                   // the body is of the shape
	undecided              // the body could be of the shape or another: it does not tell
)

// arrayItem is an element of a bare array body that is an object, with
// its type member read.
type arrayItem struct {
	fields  map[string]json.RawMessage
	typ     string // the "type" member when a string, else ""
	hasType bool   // the item has a "type" member
}

// shapeNamed is the shape of ?format=name, in any case; nil for "".
func shapeNamed(name string) (shape, error) {
	if name == "" {
		return nil, nil
	}
	f := Format(strings.ToLower(name))
	for _, s := range shapes {
		if s.format() == f {
			return s, nil
		}
	}
	return nil, fmt.Errorf("format %q: want %s", name, formatList)
}

// formatList names the formats for errors: "anthropic, openai, responses
// or gemini".
var formatList = func() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}()

// detectArray says which shape a bare array is in, from its first item
// that tells (nil when none does), and what the item looks like.
func detectArray(items []json.RawMessage) (shape, string) {
	for i, raw := range items {
		fields, err := decodeObject(raw)
		if err != nil {
			continue
		}
		var typ string
		rawType, hasType := fields["type"]
		if hasType {
			_ = decodeString(rawType, &typ)
		}
		it := arrayItem{fields: fields, typ: typ, hasType: hasType}
		for _, s := range shapes {
			if what, ok := s.claimItem(it, i); ok {
				return s, what
			}
		}
	}
	return nil, ""
}

// detectObject says which shape an object body is in (nil when it does
// not tell) and what it looks like; a body that is one piece of a turn is
// refused, and so is a body holding the calls of two shapes (oneShape).
func detectObject(msg map[string]json.RawMessage) (shape, string, error) {
	if s, what, err := oneShape(msg); s != nil || err != nil {
		return s, what, err
	}
	for _, s := range shapes {
		switch what, c := s.claimObject(msg); c {
		case mine:
			return s, what, nil
		case undecided:
			return nil, "", nil
		}
	}
	for _, s := range shapes {
		if err := s.refuseObject(msg); err != nil {
			return nil, "", err
		}
	}
	return nil, "", nil
}

// choose is the shape a body is read in: forced when given (a body that
// is clearly of another shape is refused), else what the body says, else
// defaultShape.
func choose(forced, seen shape, what string) (shape, error) {
	switch {
	case forced == nil && seen == nil:
		return defaultShape, nil
	case forced == nil:
		return seen, nil
	case seen != nil && seen != forced:
		return nil, badf("?format=%s expects %s; the body looks like %s. Drop ?format= to let the body decide, or use ?format=%s",
			forced.format(), forced.expects(), what, seen.format())
	}
	return forced, nil
}
