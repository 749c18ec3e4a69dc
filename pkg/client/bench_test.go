package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/pkg/client"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// cannedTransport answers every request with the same 200, reading the
// request body as a server would: what remains is the client's own cost.
type cannedTransport struct{ body string }

func (c cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, req.Body)
	_ = req.Body.Close()
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		ContentLength: int64(len(c.body)), Body: io.NopCloser(strings.NewReader(c.body)), Request: req,
	}, nil
}

// BenchmarkDispatchBlocks measures the client's side of a turn (encode the
// calls, build the request, read and decode the answer) over a transport
// that answers at once, for turns of 1 and 3 calls.
func BenchmarkDispatchBlocks(b *testing.B) {
	for _, n := range []int{1, 3} {
		calls := make([]envelope.ToolUseBlock, n)
		answer := `{"role":"user","content":[`
		for i := range calls {
			id := "toolu_" + strconv.Itoa(i)
			calls[i] = envelope.ToolUseBlock{Type: "tool_use", ID: id, Name: "echo",
				Input: json.RawMessage(`{"text":"` + strings.Repeat("x", 240) + `"}`)}
			if i > 0 {
				answer += ","
			}
			answer += `{"type":"tool_result","tool_use_id":"` + id + `","content":[{"type":"text","text":"` + strings.Repeat("x", 240) + `"}]}`
		}
		answer += "]}\n"
		p, err := client.New("http://127.0.0.1:1", client.WithAPIKey(""),
			client.WithHTTPClient(&http.Client{Transport: cannedTransport{body: answer}}))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			ctx := client.WithTraceparent(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
			for b.Loop() {
				res, err := p.DispatchBlocks(ctx, "session-1", calls)
				if err != nil || len(res) != n {
					b.Fatal(res, err)
				}
			}
		})
	}
}
