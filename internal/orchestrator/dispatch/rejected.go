package dispatch

// RejectMetrics is implemented by a Metrics that also counts the calls the
// dispatcher answers itself, without publishing them: an unknown tool, a
// tool no live worker serves, a call without an id, an input that is too
// large. The dispatcher checks for it with a type assertion, so a Metrics
// without it keeps working.
type RejectMetrics interface {
	// CallRejected counts one such call. tool is the name the model gave;
	// known reports whether the catalog knows it (false for an unknown tool
	// and for a call without an id, refused before the lookup), so an
	// implementation can label unknown names with one fixed value. code is
	// the is_error result's code.
	CallRejected(tool string, known bool, code string)
}

// rejected reports a call answered without being published.
func (d *Dispatcher) rejected(tool string, known bool, code string) {
	if m, ok := d.metrics.(RejectMetrics); ok {
		m.CallRejected(tool, known, code)
	}
}
