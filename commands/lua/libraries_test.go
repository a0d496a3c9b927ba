package lua

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Scripts of lock libraries outside the catalog, read from where they are
// installed (skipped when they are not): what the analysis makes of them.
// tests/interop_*_test.go drives the libraries themselves.

// TestSesamecareRedlockScripts: @sesamecare-oss/redlock 1.4.0 (node-redlock
// 5's successor) begins each script with a protected SELECT of ARGV[1]
// (the client's db, 0) and is then node-redlock's acquire, extend and
// release with ARGV shifted by one: recognised, read from the installed
// library.
func TestSesamecareRedlockScripts(t *testing.T) {
	path := filepath.Join(repoRoot(t), "tests/node/node_modules/@sesamecare-oss/redlock/build/scripts.js")
	sel := jsScript(t, path, "DB_SELECT_SCRIPT")
	ms := time.Millisecond
	cases := []struct {
		name, sha1 string
		want       *Meaning
	}{
		{"ACQUIRE_SCRIPT", "1b77b94aa78451d55dfa97e18819bfbfc596cb5b", shifted(acquire(AllKeys, IfAbsent, ms, 3, Reply{Kind: KeyCount}, zero), 2, 3, 3)},
		{"EXTEND_SCRIPT", "820e9778d2b6733e9ed771e4be90ae73a95a6f3b", shifted(extend(AllKeys, Replace, ms, 3, Reply{Kind: KeyCount}, zero), 2, 3, 3)},
		{"RELEASE_SCRIPT", "df51f6837dcfe303d334e6abea9aeae192bab216", shifted(release(AllKeys, 2, Reply{Kind: ReleasedCount}, zero, zero), 2, 0, 2)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := strings.ReplaceAll(jsScript(t, path, c.name), "${DB_SELECT_SCRIPT}", sel)
			if got := sha1hex(src); got != c.sha1 {
				t.Fatalf("sha1 %s, want %s: the installed version differs", got, c.sha1)
			}
			a := analyze(t, src)
			if !sameMeaning(a.Meaning, c.want) {
				t.Fatalf("meaning %v (args %d, %s), want %v (args %d)", a.Meaning, argsOf(a.Meaning), a.NotRecognised, c.want, c.want.Args)
			}
			if !slices.Equal(a.Vote.SelectArgs, []int{1}) {
				t.Fatalf("SelectArgs %v, want [1]", a.Vote.SelectArgs)
			}
		})
	}
}

// TestBsmRedislockScripts: bsm/redislock v0.9.4's scripts, read from the
// module cache: refresh, release and TTL are recognised; obtain (SET NX
// PX, else re-entry when GETRANGE finds the same token prefix, a status
// reply) runs by vote.
func TestBsmRedislockScripts(t *testing.T) {
	path := filepath.Join(goModCache(t), "github.com/bsm/redislock@v0.9.4/redislock.go")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s not in the module cache: %v", path, err)
	}
	script := func(name string) string {
		m := regexp.MustCompile("(?s)" + name + ` += redis\.NewScript\(` + "`(.*?)`").FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no %s", path, name)
		}
		return string(m[1])
	}
	for _, c := range []struct {
		name string
		want *Meaning
	}{
		{"luaRefresh", extend(FirstKey, Replace, time.Millisecond, 2, one, zero)},
		{"luaRelease", release(FirstKey, 1, one, zero, zero)},
		{"luaPTTL", read(FirstKey, 1)},
	} {
		if a := analyze(t, script(c.name)); !sameMeaning(a.Meaning, c.want) {
			t.Errorf("%s: meaning %v (%s), want %v", c.name, a.Meaning, a.NotRecognised, c.want)
		}
	}
	a := analyze(t, script("luaObtain"))
	if a.Verdict() != ByVote || !a.Vote.Writes || len(a.Vote.ArgCommands) != 0 {
		t.Fatalf("luaObtain: verdict %v, vote %+v, problem %v; want by vote", a.Verdict(), a.Vote, a.Problem)
	}
}

// TestInstalledLibraryScriptsNotRefused: every script text of the lock and
// semaphore libraries the interop tests drive (read from where they are
// installed) is recognised or runs by vote: the determinism and loop rules
// refuse none of them (redis-semaphore's MultiSemaphore loops up to a
// permit count from ARGV).
func TestInstalledLibraryScriptsNotRefused(t *testing.T) {
	mod, root := goModCache(t), repoRoot(t)
	sources := []struct{ dir, ext string }{
		{filepath.Join(root, "tests/node/node_modules/redis-semaphore/lib"), ".js"},
		{filepath.Join(root, "tests/node/node_modules/simple-redis-mutex/dist"), ".js"},
		{filepath.Join(root, "tests/node/node_modules/redlock"), ".js"},
		{filepath.Join(mod, "github.com/go-redsync/redsync/v4@v4.18.1"), ".go"},
		{filepath.Join(mod, "github.com/redis/rueidis@v1.0.79/rueidislock"), ".go"},
		{filepath.Join(mod, "github.com/bsm/redislock@v0.9.4"), ".go"},
		{"/usr/lib/python3/dist-packages/redis", ".py"},
	}
	quoted := regexp.MustCompile("(?s)`([^`]*redis\\.p?call[^`]*)`|\"\"\"(.*?)\"\"\"")
	n := 0
	for _, src := range sources {
		filepath.WalkDir(src.dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, src.ext) || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
				text := m[1] + m[2]
				if !strings.Contains(text, "redis.call") && !strings.Contains(text, "redis.pcall") || strings.Contains(text, "${") {
					continue
				}
				n++
				if a := Analyze([]byte(text)); a.Verdict() == Refused {
					t.Errorf("%s: refused: %v\n%s", path, a.Problem, text)
				}
			}
			return nil
		})
	}
	if n == 0 {
		t.Skip("no library installed")
	}
	t.Logf("%d library scripts", n)
}
