//go:build race

package lua

// raceEnabled: the race detector is on; the slow property tests run fewer
// cases.
const raceEnabled = true
