package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/redcon"
)

// Small limits, so that short inputs reach every limit.
var (
	fuzzAuth = limitSet{args: 8, bulk: 64, inline: 64, command: 300}
	fuzzPre  = limitSet{args: 4, bulk: 16, inline: 32, command: 80}
)

// swallowable matches a frame the scanner may drop: a multibulk count of
// zero or less, or an inline line of spaces.
var swallowable = regexp.MustCompile(`^(\*(0|-[1-9][0-9]*)\r\n| *\r?\n)$`)

// FuzzGuard drives the scanner with input split by a seed. It fails on a
// panic, on an error that is not a one-line Redis protocol error, when the
// chunking changes the outcome, when anything but whole empty frames is
// dropped, when redcon cannot parse what was released, or when a
// multibulk frame's arguments as the scanner located them differ from
// redcon's (runScanner).
func FuzzGuard(f *testing.F) {
	f.Add([]byte("*1\r\n$4\r\nPING\r\n"), uint64(0))
	f.Add([]byte("PING\r\n*0\r\n  \r\n*2\r\n$4\r\nECHO\r\n$2\r\n\r\n\r\n"), uint64(7))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		authed := seed&1 == 1
		whole := runScanner(t, fuzzAuth, fuzzPre, authed, data, nil)
		rng := rand.New(rand.NewPCG(seed, uint64(len(data))))
		chunked := runScanner(t, fuzzAuth, fuzzPre, authed, data, func() int { return 1 + rng.IntN(16) })

		if whole.err != nil {
			msg := whole.err.Error()
			if !strings.HasPrefix(msg, "Protocol error: ") || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error %q is not a one-line protocol error", msg)
			}
		}
		if scanErrText(whole.err) != scanErrText(chunked.err) || !bytes.Equal(whole.released, chunked.released) ||
			len(whole.cmds) != len(chunked.cmds) {
			t.Fatalf("chunking changed the outcome: %q, %v vs %q, %v",
				whole.released, whole.err, chunked.released, chunked.err)
		}
		checkDropped(t, authed, data, whole.released)

		rd := redcon.NewReader(bytes.NewReader(whole.released))
		for {
			_, err := rd.ReadCommands()
			if err == io.EOF {
				break
			}
			if err != nil {
				if strings.Contains(err.Error(), "unbalanced quotes") {
					break
				}
				t.Fatalf("redcon failed on released bytes %q: %v", whole.released, err)
			}
		}
	})
}

// checkDropped feeds data one byte at a time, watching the scanner's
// buffer: every run of input bytes it drops must be a whole swallowable
// frame starting at a frame boundary, and the kept bytes must begin with
// released.
func checkDropped(t *testing.T, authed bool, data, released []byte) {
	t.Helper()
	var flag atomic.Bool
	flag.Store(authed)
	s := newFrameScanner(&flag, fuzzAuth, fuzzPre)
	var kept []byte
	frameStart := 0 // input offset where the frame in progress began
	for i := range data {
		before := s.pos - s.frameAt
		if err := s.feed(data[i : i+1]); err != nil {
			break
		}
		after := s.pos - s.frameAt
		switch {
		case after == before+1: // byte added to the frame in progress
		case after == 0 && len(s.frames) > 0: // frame complete
			kept = append(kept, data[frameStart:i+1]...)
			frameStart = i + 1
			for _, _, ok := s.next(nil); ok; _, _, ok = s.next(nil) {
			}
			s.idle()
		case after == 0: // frame dropped
			if frame := data[frameStart : i+1]; !swallowable.Match(frame) {
				t.Fatalf("dropped %q, not an empty frame", frame)
			}
			frameStart = i + 1
		default:
			t.Fatalf("frame in progress went from %d to %d bytes", before, after)
		}
	}
	if !bytes.Equal(kept, released) {
		t.Fatalf("released %q, kept frames %q", released, kept)
	}
}
