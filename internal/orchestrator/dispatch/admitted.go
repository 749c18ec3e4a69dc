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

// admittedHook calls the function WithAdmitted put in ctx, if any.
func admittedHook(ctx context.Context) {
	if f, ok := ctx.Value(admittedKey{}).(func()); ok && f != nil {
		f()
	}
}
