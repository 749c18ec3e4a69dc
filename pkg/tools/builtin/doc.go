// Package builtin holds toolpool's built-in tools, written to be safe
// against hostile input (the model's, and that of the servers it reaches):
//
//   - read_file, write_file, list_dir: files in a workspace directory,
//     confined to it with os.Root. Absolute paths, ".." that leaves the
//     workspace and symbolic links that lead outside fail with a permanent
//     error ("the path … escapes the workspace") and touch nothing outside.
//     Reads and writes are capped (1 MiB by default), listings too (1,000
//     entries).
//   - http_request: GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS to an
//     http or https URL, through a netguard.Guard that refuses private,
//     loopback, link-local and other non-public addresses when it dials, so
//     DNS tricks and redirects are caught as well. Non-2xx statuses are
//     *classify.HTTPError: the pool retries 429 and 5xx and fails other
//     statuses at once.
//   - search_web: a SearXNG-compatible JSON search service, offered only
//     when its URL is configured.
//
// Register adds them all to a registry:
//
//	reg := tools.NewRegistry()
//	closer, err := builtin.Register(reg, builtin.Config{
//		Workspace: "./workspace",
//		SearchURL: "http://127.0.0.1:8888", // optional: adds search_web
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer closer.Close()
//
// NewFileTools, NewHTTPRequest and NewSearchWeb build the tools one group at
// a time, with their own settings.
package builtin
