//go:build !race

package lua

const raceEnabled = false
