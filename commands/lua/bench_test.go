package lua

import "testing"

func benchmarkAnalyze(b *testing.B, src string, want Verdict) {
	b.ReportAllocs()
	for b.Loop() {
		if got := Analyze([]byte(src)).Verdict(); got != want {
			b.Fatalf("verdict %v, want %v", got, want)
		}
	}
}

// BenchmarkAnalyze: a typical release, the redis.io compare-and-delete.
func BenchmarkAnalyze(b *testing.B) {
	benchmarkAnalyze(b, `if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end`, Recognised)
}

func BenchmarkAnalyzeExtendSwitch(b *testing.B) {
	benchmarkAnalyze(b, `local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[2])
if ARGV[3] == "0" then ttl = ttl + redis.call('pttl', KEYS[1]) end
redis.call('pexpire', KEYS[1], ttl)
return 1`, Recognised)
}

func BenchmarkAnalyzeMultiKeyAcquire(b *testing.B) {
	benchmarkAnalyze(b, `for _, k in ipairs(KEYS) do
  if redis.call('exists', k) == 1 then return 0 end
end
for _, k in ipairs(KEYS) do redis.call('set', k, ARGV[1], 'PX', ARGV[2]) end
return #KEYS`, Recognised)
}

func BenchmarkAnalyzeVote(b *testing.B) {
	benchmarkAnalyze(b, `if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`, ByVote)
}

func BenchmarkEvalRead(b *testing.B) {
	a := Analyze([]byte(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pttl', KEYS[1]) end return 0`))
	keys, argv := []string{"k"}, []string{"t"}
	view := func(string) KeyView { return held("t", 1500) }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.EvalRead(keys, argv, view); err != nil {
			b.Fatal(err)
		}
	}
}
