// Package tools is the registry of the tools a worker serves: each tool's
// name, description, JSON Schema for its input, timeout, retry policy and
// handler, and the validation of a call's input against that schema before
// the handler runs.
//
// # Which package
//
// A tool author imports this package to define, register and run tools,
// and package classify to say what the tool's errors mean:
//
//   - tools (this package): Tool, Handler and Output; Registry to register
//     tools and validate inputs; CallInfoFrom and ReportProgress inside a
//     handler.
//   - classify: Transient, Permanent, RetryAfter, Invalid, WithMessage and
//     NewHTTPError to mark errors; Policy for a tool's retries.
//   - envelope: content beyond text (envelope.Content, envelope.Block: an
//     image, a document), and the wire format of calls and results for code
//     that reads results.
//   - builtin: ready-made file, HTTP and web search tools; demo: the
//     diagnostic tools echo, sleep and flaky.
//
// # Define a tool
//
// A tool is a Tool value. The input schema is a JSON Schema whose root is
// "type": "object", as the Anthropic Messages API requires; draft 2020-12
// unless the schema names another draft in "$schema". Zero settings take the
// defaults (TimeoutDefault, ConcurrencyDefault, classify's retry policy).
//
//	weather := tools.Tool{
//		Name:        "get_weather",
//		Description: "Current weather for a city. Use it before answering questions about the weather.",
//		InputSchema: json.RawMessage(`{
//			"type": "object",
//			"properties": {
//				"city":  {"type": "string", "minLength": 1},
//				"units": {"enum": ["metric", "imperial"], "default": "metric"}
//			},
//			"required": ["city"]
//		}`),
//		Timeout:    10 * time.Second,
//		Idempotent: true,
//		Handler: func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
//			var in struct{ City, Units string }
//			if err := json.Unmarshal(input, &in); err != nil {
//				return tools.Output{}, err
//			}
//			// … call the weather service with ctx; return a *classify.HTTPError
//			// for a non-2xx answer so the worker knows whether to retry.
//			return tools.Text("12 °C, light rain in " + in.City), nil
//		},
//	}
//
// # Register it
//
// Register checks the definition and compiles the schema once; the error
// says what is wrong ("tools: register \"get weather\": name must match
// ^[a-zA-Z0-9_-]{1,64}$"). Definitions lists the tools in the format the
// Messages API takes in its "tools" field.
//
//	r := tools.NewRegistry()
//	if err := r.Register(weather); err != nil {
//		log.Fatal(err)
//	}
//	defs := r.Definitions() // [{"name":"get_weather","description":…,"input_schema":{…}}]
//
// # Validate input
//
// The worker looks the tool up and validates each call's input before it
// runs the handler. An invalid input gives a *classify.ValidationError that
// lists every bad field by path, with a reason the model can act on:
//
//	rt, _ := r.Lookup("get_weather")
//	err := rt.Validate(json.RawMessage(`{"units": "kelvin"}`))
//	// invalid input for get_weather: city: is required; units: must be one of "metric", "imperial"
//
// Paths use the notation of JavaScript and Python: items[0].name. Fields
// are sorted by path, then reason.
//
// # While a call runs
//
// A handler reads which call it runs from its context, and may report how
// far it has come; the worker carries the report to a caller that asked
// for progress, and it keeps a long call alive:
//
//	func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
//		ci, _ := tools.CallInfoFrom(ctx) // ci.Attempt, ci.Deadline, ci.Traceparent, …
//		for i, page := range pages {
//			tools.ReportProgress(ctx, tools.Progress{Progress: float64(i), Total: float64(len(pages))})
//			// … fetch page, sending ci.Traceparent along
//		}
//		return tools.Text("done"), nil
//	}
//
// The context ends when the tool's Timeout passes or the worker stops;
// return its error (ctx.Err()) and classify counts it as a timeout or a
// cancellation, both retried.
//
// # Schema engine
//
// Schemas are compiled by github.com/santhosh-tekuri/jsonschema/v6 (see
// DefaultCompiler), chosen by measurement over github.com/xeipuuv/gojsonschema
// (docs/decisions.md). NewRegistryWith takes any Compiler.
//
// The built-in tools' schemas are SearchWebSchema, ReadFileSchema and
// WriteFileSchema; the diagnostic tools echo, sleep and flaky are in
// package demo.
package tools
