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
	"path/filepath"
	"strings"

	"github.com/toolpool/toolpool"
)

// A Server of the tools of a catalog file, as `worker --tools FILE`
// serves them: here one webhook tool, whose endpoint is a web server of
// the program's (on loopback: a webhook's own host is trusted
// configuration). The catalog's MCP servers, had it any, would start and
// stop with the Server.
func ExampleLoadCatalog() {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	dir, _ := os.MkdirTemp("", "toolpool-example-")
	defer os.RemoveAll(dir)

	shout := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		io.WriteString(w, strings.ToUpper(in.Text)+"!")
	}))
	defer shout.Close()
	file := filepath.Join(dir, "tools.yaml")
	catalogYAML := `
tools:
  - name: shout
    description: Shouts a text back.
    input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
    timeout: 5s
    backend: webhook
    webhook: {url: "` + shout.URL + `"}
`
	if err := os.WriteFile(file, []byte(catalogYAML), 0o644); err != nil {
		log.Fatal(err)
	}
	catalog, err := toolpool.LoadCatalog(toolpool.CatalogConfig{File: file})
	if err != nil {
		log.Fatal(err) // names the file, the line, the tool and the field
	}
	fmt.Println("catalog:", catalog.Names())

	emb, _ := toolpool.NewEmbedded(toolpool.EmbeddedConfig{Listen: "127.0.0.1:-1", DataDir: filepath.Join(dir, "data"), Logger: logger})
	if err := emb.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer emb.Stop(ctx)
	nc, err := emb.Connect("example")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	if err := toolpool.Provision(ctx, nc, toolpool.StreamsConfig{}); err != nil {
		log.Fatal(err)
	}

	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: nc, Catalog: catalog, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(ctx) // closes the catalog too

	orch, _ := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: nc, Logger: logger})
	if err := orch.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer orch.Stop(ctx)

	results, err := orch.Dispatch(ctx, "session-1", []toolpool.ToolUse{
		{ID: "toolu_1", Name: "shout", Input: json.RawMessage(`{"text":"hello"}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(results[0].Content.Text())
	// Output:
	// catalog: [shout]
	// HELLO!
}
