package lua

import (
	"crypto/sha1"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// analyze runs Analyze and fails the test if it takes long.
func analyze(t *testing.T, src string) *Analysis {
	t.Helper()
	return Analyze([]byte(src))
}

// recognised analyses src and requires a meaning.
func recognised(t *testing.T, src string) *Meaning {
	t.Helper()
	a := analyze(t, src)
	if a.Meaning == nil {
		t.Fatalf("not recognised (%s; problem %v):\n%s", a.NotRecognised, a.Problem, src)
	}
	if a.Vote == nil {
		t.Fatalf("recognised but not vote-eligible: %v", a.Problem)
	}
	return a.Meaning
}

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// pyScript reads a script constant (NAME = """…""") from a Python file.
func pyScript(t *testing.T, path, name string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s not installed: %v", path, err)
	}
	re := regexp.MustCompile(`(?s)` + name + ` = """(.*?)"""`)
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no %s", path, name)
	}
	return string(m[1])
}

// jsScript reads a script constant (const name = `…`;) from a JavaScript file.
func jsScript(t *testing.T, path, name string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s not installed (run npm ci in tests/node): %v", path, err)
	}
	re := regexp.MustCompile("(?s)const " + name + " = `(.*?)`")
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no %s", path, name)
	}
	return string(m[1])
}

// goScript reads a script (redis.NewScript(n, `…`, …)) from a Go file.
func goScript(t *testing.T, path, name string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s not in the module cache: %v", path, err)
	}
	re := regexp.MustCompile("(?s)var " + name + " = redis.NewScript\\(\\d+, `(.*?)`")
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no %s", path, name)
	}
	return string(m[1])
}

func goModCache(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
