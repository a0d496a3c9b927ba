package relay

import (
	"strings"
	"testing"
	"time"
)

// TestMatcher runs the exactly-once rule over interleavings of copies.
// Each step is "b<i> <key>" (a copy from backend i, then whether it was
// delivered: + or -), "down <i>", "up <i>", or "wait <duration>".
func TestMatcher(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps string
	}{
		{"one message, five copies in order",
			"b0 m+ b1 m- b2 m- b3 m- b4 m-"},
		{"one message, five copies in any order",
			"b3 m+ b0 m- b4 m- b1 m- b2 m-"},
		{"two identical messages, one backend ahead",
			"b2 m+ b2 m+ b0 m- b1 m- b0 m- b3 m- b1 m- b4 m- b3 m- b4 m-"},
		{"two identical messages interleaved",
			"b0 m+ b1 m- b1 m+ b0 m- b2 m- b2 m- b3 m- b4 m- b3 m- b4 m-"},
		{"distinct payloads are distinct messages",
			"b0 a+ b0 b+ b1 b- b1 a- b2 a- b2 b-"},
		{"a message published on one backend only",
			"b3 m+"},
		{"the same payload again after every backend caught up is a new message",
			"b0 m+ b1 m- b2 m- b3 m- b4 m- b4 m+ b0 m-"},
		{"a down backend is not waited for: the entry goes when the others caught up",
			"down 4 b0 m+ b1 m- b2 m- b3 m- b0 m+ b1 m- b2 m- b3 m-"},
		{"a backend coming back delivers only what follows",
			"down 4 b0 m+ b1 m- b2 m- b3 m- up 4 b4 m+ b0 m- b1 m- b2 m- b3 m-"},
		{"a backend lagging less than the window causes no duplicate",
			"b0 m+ b1 m- b2 m- b3 m- wait 4s b4 m-"},
		{"a backend lagging more than the window causes a duplicate",
			"b0 m+ b1 m- b2 m- b3 m- wait 6s b4 m+"},
		{"the window counts from the last copy",
			"b0 m+ wait 3s b1 m- wait 3s b2 m- wait 3s b3 m- b4 m-"},
		{"a backend that missed a message hides the next copy only while another delivers it",
			"b0 m+ b1 m- b2 m- b3 m- b0 m+ b4 m- b1 m- b2 m- b3 m-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			m := newMatcher(5, 5*time.Second, 0)
			for b := range 5 {
				m.setUp(b, true)
			}
			f := strings.Fields(tc.steps)
			for i := 0; i < len(f); i += 2 {
				switch f[i] {
				case "down", "up":
					m.setUp(int(f[i+1][0]-'0'), f[i] == "up")
					continue
				case "wait":
					d, err := time.ParseDuration(f[i+1])
					if err != nil {
						t.Fatal(err)
					}
					now = now.Add(d)
					continue
				}
				b := int(f[i][1] - '0')
				key, want := f[i+1][:len(f[i+1])-1], f[i+1][len(f[i+1])-1] == '+'
				if got := m.offer(b, key, now); got != want {
					t.Fatalf("step %d (%s %s): delivered %v, want %v", i/2, f[i], f[i+1], got, want)
				}
			}
		})
	}
}

// TestMatcherForgets: caught-up entries go at once, idle ones after the
// window, and the oldest beyond the bound.
func TestMatcherForgets(t *testing.T) {
	now := time.Unix(1000, 0)
	m := newMatcher(3, time.Second, 4)
	for b := range 3 {
		m.setUp(b, true)
	}
	for _, b := range []int{0, 1, 2} {
		m.offer(b, "x", now)
	}
	if m.len() != 0 {
		t.Fatalf("%d entries after every backend delivered, want 0", m.len())
	}
	m.offer(0, "y", now)
	if m.len() != 1 {
		t.Fatalf("%d entries while two backends are behind, want 1", m.len())
	}
	m.setUp(1, false)
	m.setUp(2, false)
	if m.len() != 0 {
		t.Fatalf("%d entries once the backends behind went down, want 0", m.len())
	}
	m.setUp(1, true)
	m.setUp(2, true)
	m.offer(0, "z", now)
	m.offer(0, "w", now.Add(2*time.Second))
	if m.len() != 1 {
		t.Fatalf("%d entries after the window, want 1 (the idle one forgotten)", m.len())
	}
	for i := range 10 {
		m.offer(0, string(rune('a'+i)), now.Add(2*time.Second))
	}
	if m.len() != 4 || m.evictions == 0 {
		t.Fatalf("%d entries, %d evictions; want the bound 4 kept by eviction", m.len(), m.evictions)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"ch*", "ch1", true},
		{"ch*", "c", false},
		{"h?llo", "hello", true},
		{"h?llo", "hllo", false},
		{"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-c]llo", "hbllo", true},
		{"h[a-c]llo", "hdllo", false},
		{`h\*llo`, "h*llo", true},
		{`h\*llo`, "hello", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"__keyspace@0__:*", "__keyspace@0__:lock", true},
		{"*a*a*a*a*a*a*a*b", strings.Repeat("a", 60), false},
	} {
		if got := GlobMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("GlobMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// len is the number of entries (tests).
func (m *matcher) len() int { return len(m.entries) }
