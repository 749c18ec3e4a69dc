package httpapi

import (
	"strconv"
	"strings"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// flaggedText is a result's text for a format without an error flag:
// prefixed with ErrorPrefix for an error. carrier names what carries it.
func flaggedText(r *envelope.Result, carrier string) string {
	text := contentText(r.Content, carrier)
	if r.IsError {
		return ErrorPrefix + text
	}
	return text
}

// contentText joins the content's text blocks with "\n" and names the other
// blocks in brackets, e.g. "[image block omitted: OpenAI tool messages
// carry text only]"; carrier names what carries the text.
func contentText(c envelope.Content, carrier string) string {
	var parts []string
	for _, b := range c {
		switch {
		case b.Type == "text" && b.Text != "":
			parts = append(parts, b.Text)
		case b.Type != "text":
			parts = append(parts, "["+b.Type+" block omitted: "+carrier+" carry text only]")
		}
	}
	return strings.Join(parts, "\n")
}

// errorIndexes lists the positions of the error results, comma-separated.
func errorIndexes(results []envelope.Result) string {
	var b strings.Builder
	for i := range results {
		if !results[i].IsError {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}
