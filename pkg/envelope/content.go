package envelope

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
)

// Block is one content block of a result: a text block, or any other
// Anthropic content block (image, document, …) kept verbatim in Raw.
//
// A text block is written as {"type":"text","text":"…"}; other fields a text
// block may carry (citations, cache_control) are not kept. Any other block is
// written as its Raw bytes, which must hold a JSON object (Type then only
// tells readers what Raw holds); decoding fills Raw with the block's bytes as
// they arrived, so such a block survives a round trip unchanged.
type Block struct {
	Type string          // "text", "image", …
	Text string          // for Type "text"
	Raw  json.RawMessage // the whole block, for other types
}

// Content is a result's content: a list of blocks. On the wire it is an array
// of Anthropic content blocks; a plain JSON string decodes as one text block.
// Empty content is written as [], never null.
type Content []Block

// Text returns content made of one text block.
func Text(s string) Content { return Content{{Type: "text", Text: s}} }

// Text returns the concatenated text of the text blocks, joined with "\n".
// Other blocks are skipped.
func (c Content) Text() string {
	n, count := 0, 0
	var only string
	for _, b := range c {
		if b.Type == "text" {
			n += len(b.Text)
			count++
			only = b.Text
		}
	}
	switch count {
	case 0:
		return ""
	case 1:
		return only
	}
	var sb strings.Builder
	sb.Grow(n + count - 1)
	first := true
	for _, b := range c {
		if b.Type != "text" {
			continue
		}
		if !first {
			sb.WriteByte('\n')
		}
		first = false
		sb.WriteString(b.Text)
	}
	return sb.String()
}

// MarshalJSON writes the block: {"type":"text","text":…} for a text block,
// Raw for any other. A block without a type, or a non-text block whose Raw is
// not a JSON object, is an error.
func (b Block) MarshalJSON() ([]byte, error) {
	out, err := appendBlock(make([]byte, 0, blockSizeHint(&b)), &b)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UnmarshalJSON reads one content block. A block without a string "type", or
// a text block whose "text" is not a string, is an error (*DecodeError).
func (b *Block) UnmarshalJSON(data []byte) error {
	if !jsonwire.Valid(data) {
		return syntaxError("", data)
	}
	r := reader{data: data}
	blk, err := r.block(trimmed(data), "")
	if err != nil {
		return err
	}
	*b = blk
	return nil
}

// MarshalJSON writes the content as a JSON array of blocks; empty content is
// [].
func (c Content) MarshalJSON() ([]byte, error) {
	out, err := appendContent(make([]byte, 0, contentSizeHint(c)), c, "")
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UnmarshalJSON reads an array of content blocks, or a JSON string as one
// text block (an empty string, [] and null give nil content). Errors are
// *DecodeError naming the bad block, e.g. field "[2].type".
func (c *Content) UnmarshalJSON(data []byte) error {
	if !jsonwire.Valid(data) {
		return syntaxError("", data)
	}
	r := reader{data: data}
	content, err := r.content(trimmed(data), "")
	if err != nil {
		return err
	}
	*c = content
	return nil
}

// content decodes the content value at s; field prefixes the names of bad
// fields in errors.
func (r *reader) content(s span, field string) (Content, error) {
	var buf [4]blockAt
	blocks, size, err := r.locateContent(s, field, buf[:0])
	if err != nil {
		return nil, err
	}
	if len(blocks) == 0 {
		return nil, nil
	}
	r.arena.Grow(size)
	out := make(Content, len(blocks))
	r.fillContent(blocks, out)
	return out, nil
}

// block decodes the content block at s.
func (r *reader) block(s span, field string) (Block, error) {
	b, _, err := r.locateBlock(s.start, s.end, field)
	if err != nil {
		return Block{}, err
	}
	var out [1]Block
	r.fillContent([]blockAt{b}, out[:])
	return out[0], nil
}

// blockAt is a content block found in a message, not yet decoded.
type blockAt struct {
	text  bool // a text block; or the content was a plain string
	typ   span // the type of a block that is not text
	value span // the text of a text block; the whole of any other block
}

// locateContent finds the blocks of the content value at s and appends them
// to dst; size is what their strings take in the arena. Content decodes in two
// steps, locate then fill, so that the caller can reserve the arena once and
// size the block slice exactly.
func (r *reader) locateContent(s span, field string, dst []blockAt) (blocks []blockAt, size int, err *DecodeError) {
	v := r.raw(s)
	if len(v) == 0 || r.isNull(s) {
		return dst, 0, nil
	}
	switch v[0] {
	case '"':
		if len(v) == 2 { // "": no content
			return dst, 0, nil
		}
		return append(dst, blockAt{text: true, value: s}), r.stringSize(s), nil
	case '[':
	default:
		return nil, 0, malformed(field, "must be an array of content blocks or a string, not "+r.kind(s))
	}
	for i := jsonwire.SkipSpace(r.data, s.start+1); i < s.end && r.data[i] != ']'; {
		b, end, err := r.locateBlock(i, s.end, "")
		if err != nil {
			// Name the block only now: building "content[3]" for every block
			// would cost an allocation each.
			err.Field = dot(field+"["+strconv.Itoa(len(dst))+"]", err.Field)
			return nil, 0, err
		}
		dst = append(dst, b)
		if b.text {
			size += r.stringSize(b.value)
		} else {
			size += r.stringSize(b.typ)
		}
		i = jsonwire.SkipSpace(r.data, end)
		if i < s.end && r.data[i] == ',' {
			i = jsonwire.SkipSpace(r.data, i+1)
		}
	}
	return dst, size, nil
}

// locateBlock checks the content block that starts at r.data[start] and
// ends by r.data[limit], says where its parts lie and returns the index just
// past it.
func (r *reader) locateBlock(start, limit int, field string) (blockAt, int, *DecodeError) {
	it, ok := newObjectIter(r.data[:limit], start)
	if !ok {
		end := jsonwire.SkipValue(r.data[:limit], start)
		if end < 0 {
			return blockAt{}, 0, malformed(field, "is not valid JSON")
		}
		return blockAt{}, 0, malformed(field, "must be a content block object, not "+r.kind(span{start, end}))
	}
	var typ, text span
	for {
		key, vs, ve, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			typ = span{vs, ve}
		case "text":
			text = span{vs, ve}
		}
	}
	if it.bad {
		return blockAt{}, 0, malformed(field, "is not valid JSON")
	}
	end := it.pos // just past the closing brace
	if !typ.present() {
		return blockAt{}, 0, malformed(dot(field, "type"), "missing; every content block needs a type")
	}
	if !r.isString(typ) {
		return blockAt{}, 0, malformed(dot(field, "type"), "must be a string, not "+r.kind(typ))
	}
	if string(r.raw(typ)) != `"text"` && !r.stringIs(typ, "text") {
		if r.blankString(typ) {
			return blockAt{}, 0, malformed(dot(field, "type"), "missing; every content block needs a type")
		}
		return blockAt{typ: typ, value: span{start, end}}, end, nil
	}
	if !text.present() {
		return blockAt{}, 0, malformed(dot(field, "text"), "missing; a text block needs a string \"text\"")
	}
	if !r.isString(text) {
		return blockAt{}, 0, malformed(dot(field, "text"), "must be a string, not "+r.kind(text))
	}
	return blockAt{text: true, value: text}, end, nil
}

// fillContent decodes blocks into out, which has the same length.
func (r *reader) fillContent(blocks []blockAt, out Content) {
	for i, b := range blocks {
		if b.text {
			text, _ := r.string(b.value) // checked by locateBlock
			out[i] = Block{Type: "text", Text: text}
			continue
		}
		typ, _ := r.string(b.typ)
		out[i] = Block{Type: typ, Raw: json.RawMessage(append([]byte(nil), r.raw(b.value)...))}
	}
}

// dot joins a field path and a member name; either may be empty.
func dot(prefix, name string) string {
	switch {
	case prefix == "":
		return name
	case name == "":
		return prefix
	}
	return prefix + "." + name
}

// blockSizeHint guesses the encoded size of b.
func blockSizeHint(b *Block) int {
	if b.Type == "text" {
		return len(b.Text) + len(b.Text)/16 + 32
	}
	return len(b.Raw) + 2
}

// contentSizeHint guesses the encoded size of c.
func contentSizeHint(c Content) int {
	n := 2
	for i := range c {
		n += blockSizeHint(&c[i]) + 1
	}
	return n
}

// appendBlock appends b as JSON; field names b in errors.
func appendBlock(dst []byte, b *Block) ([]byte, error) {
	switch b.Type {
	case "text":
		dst = append(dst, `{"type":"text","text":`...)
		dst = jsonwire.AppendString(dst, b.Text)
		return append(dst, '}'), nil
	case "":
		return nil, malformed("type", "missing; every content block needs a type")
	}
	raw := trimSpace(b.Raw)
	if len(raw) == 0 || raw[0] != '{' || !jsonwire.Valid(raw) {
		return nil, malformed("raw", "a "+strconv.Quote(b.Type)+" block must carry its JSON object in Raw")
	}
	return append(dst, raw...), nil
}

// appendContent appends c as a JSON array; field names c in errors.
func appendContent(dst []byte, c Content, field string) ([]byte, error) {
	dst = append(dst, '[')
	for i := range c {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		dst, err = appendBlock(dst, &c[i])
		if err != nil {
			if de, ok := err.(*DecodeError); ok {
				de.Field = dot(field+"["+strconv.Itoa(i)+"]", de.Field)
			}
			return nil, err
		}
	}
	return append(dst, ']'), nil
}
