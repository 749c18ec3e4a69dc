package bench

import "time"

// frontStopTimeout bounds the end of a front door's phase: the clients'
// goodbyes and the HTTP server's drain.
const frontStopTimeout = 10 * time.Second

// frontPhases are the front doors of Config.Fronts and their phases, in
// the order the report lists them.
var frontPhases = []struct{ front, phase string }{
	{FrontHTTP, PhasePoolHTTP},
	{FrontMCP, PhasePoolMCP},
	{FrontMCPSDK, PhasePoolMCPSDK},
}

// frontPhase is the phase of a front door.
func frontPhase(front string) string {
	for _, f := range frontPhases {
		if f.front == front {
			return f.phase
		}
	}
	return ""
}

// phaseFront is the front door of a phase; ok is false for a phase
// that is not a front door's.
func phaseFront(phase string) (front string, ok bool) {
	for _, f := range frontPhases {
		if f.phase == phase {
			return f.front, true
		}
	}
	return "", false
}
