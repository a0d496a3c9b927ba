package lua

import "fmt"

// The verdict of an analysis, for tests: the proxy reads Meaning, Vote
// and Problem directly.

// Verdict is what the proxy does with a script.
type Verdict int

const (
	// Refused: the script cannot run; Problem says where and why.
	Refused Verdict = iota
	// ByVote: the script runs on every backend and a quorum's reply wins.
	ByVote
	// Recognised: the proxy carries out Meaning as a quorum operation.
	Recognised
)

func (v Verdict) String() string {
	switch v {
	case Refused:
		return "refused"
	case ByVote:
		return "vote"
	case Recognised:
		return "recognised"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Verdict is Recognised when there is a Meaning, else Fallback.
func (a *Analysis) Verdict() Verdict {
	if a.Meaning != nil {
		return Recognised
	}
	return a.Fallback()
}

// Fallback is what the proxy does with the script when it does not use the
// Meaning: ByVote or Refused (with scripts = "recognised" the proxy
// refuses every script without a Meaning).
func (a *Analysis) Fallback() Verdict {
	if a.Vote != nil {
		return ByVote
	}
	return Refused
}
