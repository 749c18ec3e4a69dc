//go:build !race

package tools

// raceEnabled: see race_test.go.
const raceEnabled = false
