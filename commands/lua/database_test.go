package lua

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// shifted is m with its token and ttl at other ARGV indices (scripts whose
// ARGV[1] is a database index).
func shifted(m *Meaning, token, ttl, args int) *Meaning {
	c := *m
	c.Token, c.TTL, c.Args = token, ttl, args
	return &c
}

// TestSelectZero: SELECT in a script only with 0, literal or from ARGV
// checked at run time; recognition sees through it.
func TestSelectZero(t *testing.T) {
	ms := time.Millisecond
	relDB := func(sel string) string {
		return sel + `
if redis.call('get', KEYS[1]) == ARGV[2] then return redis.call('del', KEYS[1]) end
return 0`
	}
	cases := []struct {
		name, src  string
		selectArgs []int
		want       *Meaning // nil: by vote
	}{
		{"literal 0", relDB(`redis.call('SELECT', 0)`), nil, shifted(release(FirstKey, 1, one, zero, zero), 2, 0, 2)},
		{"literal '0', lower case, pcall", relDB(`redis.pcall("select", "0")`), nil, shifted(release(FirstKey, 1, one, zero, zero), 2, 0, 2)},
		{"ARGV[1]", relDB(`redis.call('SELECT', ARGV[1])`), []int{1}, shifted(release(FirstKey, 1, one, zero, zero), 2, 0, 2)},
		{"tonumber(ARGV[1]) with redis.call", relDB(`redis.call('SELECT', tonumber(ARGV[1]))`), []int{1}, shifted(release(FirstKey, 1, one, zero, zero), 2, 0, 2)},
		{"through a local", relDB(`local db = tonumber(ARGV[1])
redis.pcall('SELECT', db)`), []int{1}, shifted(release(FirstKey, 1, one, zero, zero), 2, 0, 2)},
		{"acquire all with the database last", `redis.pcall('SELECT', tonumber(ARGV[3]))
for _, k in ipairs(KEYS) do
  if redis.call('exists', k) == 1 then return 0 end
end
for _, k in ipairs(KEYS) do redis.call('set', k, ARGV[1], 'PX', ARGV[2]) end
return #KEYS`, []int{3}, &Meaning{Op: OpAcquire, Keys: AllKeys, Token: 1, TTL: 2, Unit: ms, Acquire: IfAbsent, Args: 3,
			Replies: map[Outcome]Reply{Granted: {Kind: KeyCount}, Denied: zero}}},
		{"read", `redis.call('SELECT', ARGV[1])
if redis.call('get', KEYS[1]) == ARGV[2] then return redis.call('pttl', KEYS[1]) end
return -3`, []int{1}, read(FirstKey, 2)},
		{"by vote: a sorted set", `redis.call('SELECT', ARGV[1])
redis.call('zadd', KEYS[1], ARGV[3], ARGV[2])
return redis.call('zcard', KEYS[1])`, []int{1}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := analyze(t, c.src)
			if a.Vote == nil {
				t.Fatalf("refused: %v", a.Problem)
			}
			if !a.Vote.Selects || !slices.Equal(a.Vote.SelectArgs, c.selectArgs) {
				t.Fatalf("Selects %v, SelectArgs %v; want true, %v", a.Vote.Selects, a.Vote.SelectArgs, c.selectArgs)
			}
			if c.want == nil {
				if a.Meaning != nil {
					t.Fatalf("recognised as %v, want by vote", a.Meaning)
				}
				return
			}
			if !sameMeaning(a.Meaning, c.want) {
				t.Fatalf("meaning %v (args %d, %s), want %v", a.Meaning, argsOf(a.Meaning), a.NotRecognised, c.want)
			}
		})
	}
}

func argsOf(m *Meaning) int {
	if m == nil {
		return -1
	}
	return m.Args
}

// TestSelectRefused: any other SELECT reaches another database.
func TestSelectRefused(t *testing.T) {
	for _, src := range []string{
		`redis.call('SELECT', 1) return 1`,
		`redis.call('SELECT', '00') return 1`,
		`redis.call('SELECT', ARGV[1] .. '') return 1`,
		`redis.call('SELECT', tonumber(ARGV[1]) + 1) return 1`,
		`redis.call('SELECT', #KEYS) return 1`,
		`redis.call('SELECT', 0, 1) return 1`,
		`redis.call('SELECT') return 1`,
		`redis.call('SELECT', unpack(ARGV)) return 1`,
		`local db = ARGV[1]
if #KEYS > 1 then db = '3' end
redis.call('SELECT', db) return 1`,
		`redis.call('SWAPDB', 0, 1) return 1`,
	} {
		a := analyze(t, src)
		if a.Vote != nil || a.Meaning != nil || a.Problem == nil || !strings.Contains(a.Problem.Reason, "reaches another database") {
			t.Errorf("%q: vote %v, meaning %v, problem %v; want refused: reaches another database", src, a.Vote, a.Meaning, a.Problem)
		}
	}
}

// TestSelectCheckRun: each run checks that the ARGV elements passed to
// SELECT are "0", recognised or not; SelectProblem names the first SELECT.
func TestSelectCheckRun(t *testing.T) {
	src := `local x = 1
redis.pcall('SELECT', tonumber(ARGV[1]))
if redis.call('get', KEYS[1]) == ARGV[2] then return redis.call('del', KEYS[1]) end
return 0`
	v := analyze(t, src).Vote
	if p := v.CheckRun(1, []string{"0", "tok"}); p != nil {
		t.Fatalf("ARGV[1] = 0: %v", p)
	}
	for _, argv := range [][]string{{"1", "tok"}, {"00", "tok"}, {" 0", "tok"}, {"0.0", "tok"}, {}} {
		p := v.CheckRun(1, argv)
		if p == nil || p.Line != 2 || !strings.Contains(p.Reason, "may only SELECT 0") {
			t.Errorf("ARGV %q: %v, want a problem at line 2", argv, p)
		}
	}
	p := v.SelectProblem("backend 127.0.0.1:6380 uses database 3")
	if p.Line != 2 || !strings.Contains(p.Reason, "backend 127.0.0.1:6380 uses database 3") {
		t.Errorf("SelectProblem = %v", p)
	}
	// A literal SELECT 0 needs no run-time check, but still selects.
	lit := analyze(t, `redis.call('select', 0) return redis.call('get', KEYS[1])`).Vote
	if !lit.Selects || len(lit.SelectArgs) != 0 || lit.CheckRun(1, nil) != nil {
		t.Errorf("literal SELECT 0: %+v", lit)
	}
	if none := analyze(t, `return redis.call('get', KEYS[1])`).Vote; none.Selects {
		t.Errorf("a script without SELECT: Selects = true")
	}
}
