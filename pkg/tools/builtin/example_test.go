package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

func ExampleRegister() {
	dir, err := os.MkdirTemp("", "workspace-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	reg := tools.NewRegistry()
	closer, err := builtin.Register(reg, builtin.Config{Workspace: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer closer.Close()
	fmt.Println(reg.Names())

	write, _ := reg.Lookup("write_file")
	out, _ := write.Handler(context.Background(), json.RawMessage(`{"path": "notes/todo.md", "content": "- ship it\n"}`))
	fmt.Println(out.Content.Text())

	read, _ := reg.Lookup("read_file")
	_, err = read.Handler(context.Background(), json.RawMessage(`{"path": "../../etc/passwd"}`))
	fmt.Println(err != nil)
	// Output:
	// [http_request list_dir read_file write_file]
	// Wrote 10 bytes to "notes/todo.md".
	// true
}
