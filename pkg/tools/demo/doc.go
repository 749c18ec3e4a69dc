// Package demo holds toolpool's three diagnostic tools, which the
// --demo-tools flag adds to a worker: echo returns its text, sleep waits,
// and flaky fails a chosen number of attempts with a chosen error before it
// succeeds. They exercise the pool's timeouts, retries, dead-lettering and
// panic recovery end to end without any outside service.
//
//	r := tools.NewRegistry()
//	if err := demo.Register(r); err != nil {
//		return err
//	}
//
// Each tool is also available on its own (Echo, Sleep, Flaky) as a
// tools.Tool value, so a test can change its Timeout or Retry policy before
// registering it:
//
//	s := demo.Sleep()
//	s.Timeout = 50 * time.Millisecond
//	r.MustRegister(s)
//
// flaky keeps no state between attempts: it reads the attempt number from
// tools.CallInfoFrom(ctx), so a call's attempts may run on different
// workers and still fail exactly "times" times.
package demo
