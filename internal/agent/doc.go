// Package agent is an agent loop on the Anthropic Messages API
// (github.com/anthropics/anthropic-sdk-go) whose tool calls run on a
// toolpool: the loop behind "orchestrator run".
//
// Each assistant turn's tool_use blocks go to the pool in one Dispatch and
// run in parallel; failed calls come back as tool_result blocks with
// is_error set, written for the model, and the pool adds advice against
// retrying a tool that keeps failing in the run's session. The loop ends
// when the model answers without calling tools, or with ErrMaxIterations.
//
//	c := anthropic.NewClient() // ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
//	pool, err := client.New("http://127.0.0.1:8080")
//	if err != nil { … }
//	tools, err := pool.Tools(ctx)
//	if err != nil { … }
//	loop := &agent.Loop{Client: &c.Messages, Dispatcher: pool, Tools: tools}
//	res, err := loop.Run(ctx, "Summarise the files in the workspace.")
//	if errors.Is(err, agent.ErrMaxIterations) { … } // res holds what was done
//	fmt.Println(res.Text)
package agent
