package dispatch

import "context"

type admittedKey struct{}

// WithAdmitted returns ctx carrying f: Dispatch under it calls f once
// admission control has admitted the turn, before any call is held or
// published. A turn refused for saturation returns its *SaturatedError
// without calling f. Durable tasks use it to answer their creator with
// the admission's verdict while the calls run on.
func WithAdmitted(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, admittedKey{}, f)
}

// SignalAdmitted calls the function WithAdmitted put in ctx, if any: for
// a layer in front of Dispatch (the policy gate) that holds calls before
// they reach it, so that a durable task's creator is answered while they
// wait. A later call by Dispatch itself does no harm.
func SignalAdmitted(ctx context.Context) { admittedHook(ctx) }

// admittedHook calls the function WithAdmitted put in ctx, if any.
func admittedHook(ctx context.Context) {
	if f, ok := ctx.Value(admittedKey{}).(func()); ok && f != nil {
		f()
	}
}
