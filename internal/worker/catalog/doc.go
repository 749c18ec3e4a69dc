// Package catalog reads a tool catalog file: a YAML (or JSON) list of tools
// that turns any HTTP endpoint or command into a tool of the pool, without
// writing Go. Each entry gives the tool's name, description and input
// schema for the model, its timeout, retry policy, idempotency,
// fleet-wide concurrency, fair shares (fairness: tenant, session or
// input.<field>) and limits per fairness key (per_key: concurrency, rate
// per period, burst), and a backend:
//
//   - webhook: the call's input is POSTed as JSON to a URL; a 2xx body is
//     the result, any other status is classified (429 and 5xx are retried,
//     other 4xx are not). Header values may refer to environment variables,
//     ${NAME}, resolved once at load time; their values are never logged
//     or shown to the model.
//   - exec: a command (an argv list, no shell) runs with the input on its
//     stdin; stdout is the result. Exit status 75 (EX_TEMPFAIL) is retried,
//     any other failure is not and shows the model the end of stderr. At
//     the timeout the command's whole process group is killed; on Linux
//     it is killed too when the worker process dies, kill -9 included
//     (Pdeathsig, and the exec guard: the worker's binary started again
//     as toolpool-exec-guard, which kills the groups its worker left).
//   - builtin: a tool compiled into the binary, with the file's
//     description, timeout, retry and concurrency laid over its own.
//   - mcp: the tools of an MCP server, a stdio command the worker keeps
//     running or a streamable-HTTP URL, with the server's descriptions
//     and schemas and the entry's timeout, retry and concurrency for each
//     (package mcpback). File.StartMCP starts the servers and registers
//     their tools; Tools and Apply leave mcp entries out.
//
// A catalog:
//
//	tools:
//	  - name: weather
//	    description: Current weather for a city.
//	    input_schema:
//	      type: object
//	      properties:
//	        city: {type: string}
//	      required: [city]
//	    timeout: 10s
//	    retry: {max_attempts: 4, base_delay: 500ms}
//	    idempotent: true
//	    fairness: input.city     # share the slots between cities, within each tenant
//	    per_key: {concurrency: 8, rate: 50, per: 1s}
//	    backend: webhook
//	    webhook:
//	      url: https://weather.example.com/v1/now
//	      headers:
//	        Authorization: Bearer ${WEATHER_TOKEN}
//
// Load it, then register its tools next to the others a worker serves:
//
//	f, err := catalog.Load("tools.yaml", catalog.Options{})
//	if err != nil {
//		log.Fatal(err) // tools.yaml:9: tool "weather": retry.max_attempts: must be between 1 and 100, got 0
//	}
//	reg := tools.NewRegistry()
//	if err := f.Apply(reg, builtins); err != nil { // builtins: map[string]tools.Tool, may be nil
//		log.Fatal(err)
//	}
//
// Every problem is an *Error naming the file, the line, the tool and the
// field. Unknown keys are errors. The full format is in docs/tools.md.
package catalog
