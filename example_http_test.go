package toolpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool"
)

// An orchestrator whose HTTP API is mounted on the program's own mux,
// with API keys: an agent (here a plain HTTP request) posts a model's
// tool_use blocks with its key and gets the next user message back.
func ExampleOrchestrator_Handler() {
	ctx := context.Background()
	nc, stop := startPool(ctx)
	defer stop()

	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{
		Conn: nc,
		APIKeys: []toolpool.APIKey{
			{Tenant: "team-a", Key: "team-a-secret-0123456789", Tools: []string{"add"}},
		},
		Logger: quiet,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := orch.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer orch.Stop(ctx)

	mux := http.NewServeMux()
	mux.Handle("/v1/", orch.Handler()) // POST /v1/tool_calls, GET /v1/tools
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "the program's own page") })
	web := httptest.NewServer(mux)
	defer web.Close()

	post := func(key string) {
		body := `[{"type":"tool_use","id":"toolu_1","name":"add","input":{"a":2,"b":3}}]`
		req, _ := http.NewRequest("POST", web.URL+"/v1/tool_calls", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.Status)
		fmt.Println(strings.TrimSpace(string(answer)))
	}
	post("team-a-secret-0123456789")
	post("")
	// Output:
	// 200 OK
	// {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"5"}]}]}
	// 401 Unauthorized
	// {"error":{"type":"unauthorized","message":"this API needs an API key: send Authorization: Bearer <key>"}}
}

// quiet discards the examples' logs.
var quiet = slog.New(slog.DiscardHandler)

// startPool starts an embedded JetStream server with the streams, and a
// Server of the tool add; stop stops them.
func startPool(ctx context.Context) (nc *nats.Conn, stop func()) {
	dir, _ := os.MkdirTemp("", "toolpool-example-")
	emb, _ := toolpool.NewEmbedded(toolpool.EmbeddedConfig{Listen: "127.0.0.1:-1", DataDir: dir, Logger: quiet})
	if err := emb.Start(ctx); err != nil {
		log.Fatal(err)
	}
	nc, err := emb.Connect("example")
	if err != nil {
		log.Fatal(err)
	}
	if err := toolpool.Provision(ctx, nc, toolpool.StreamsConfig{}); err != nil {
		log.Fatal(err)
	}
	reg := toolpool.NewRegistry()
	reg.MustRegister(toolpool.Tool{
		Name:        "add",
		Description: "Adds two integers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`),
		Handler: func(ctx context.Context, input json.RawMessage) (toolpool.Output, error) {
			var in struct{ A, B int }
			if err := json.Unmarshal(input, &in); err != nil {
				return toolpool.Output{}, toolpool.Permanent(err)
			}
			return toolpool.Text(fmt.Sprint(in.A + in.B)), nil
		},
	})
	srv, _ := toolpool.NewServer(toolpool.ServerConfig{Conn: nc, Registry: reg, Logger: quiet})
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	return nc, func() {
		_ = srv.Stop(ctx)
		nc.Close()
		_ = emb.Stop(ctx)
		_ = os.RemoveAll(dir)
	}
}
