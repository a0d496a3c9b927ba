package lua

import (
	"errors"
	"fmt"
	"strings"
	"time"

	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

const (
	// MaxSource is the longest script Analyze reads.
	MaxSource = 512 << 10
	// maxLevels is Lua 5.1's limit on nested syntax (LUAI_MAXCCALLS).
	maxLevels = 200
	// chunkName is how errors name the script, as Redis 7 does.
	chunkName = "user_script"
)

// Analysis is the result of Analyze. Nothing changes it afterwards (callers
// must not either), and its methods are safe for concurrent use.
type Analysis struct {
	// Meaning, when not nil, is the lock operation the script performs.
	Meaning *Meaning
	// Vote, when not nil, says the script may run by vote and what the
	// proxy must know to do so.
	Vote *Vote
	// Problem, when not nil, is why the script may not run by vote.
	Problem *Problem
	// NotRecognised says why Meaning is nil, for logs.
	NotRecognised string
	// Invalid: the script is not valid Lua (it does not parse or compile),
	// so Redis would not load it either (SCRIPT LOAD fails).
	Invalid bool

	proto *glua.FunctionProto
}

// Analyze classifies a script. It never panics, and its time and memory are
// bounded for any input.
func Analyze(src []byte) (a *Analysis) {
	defer func() {
		if r := recover(); r != nil {
			a = refuse(1, fmt.Sprintf("the analysis failed (%v); the script is refused", r))
		}
	}()
	if len(src) > MaxSource {
		return refuse(1, fmt.Sprintf("the script is longer than %d KiB", MaxSource>>10))
	}
	text := string(src)
	if strings.HasPrefix(text, "#!") {
		first, _, _ := strings.Cut(text, "\n")
		fields := strings.Fields(first[2:])
		if len(fields) == 0 || fields[0] != "lua" {
			return refuse(1, "the shebang names an engine other than lua")
		}
		text = "--" + text[2:] // keep the line numbers
	}
	if p := prescan(text); p != nil {
		return &Analysis{Problem: p, NotRecognised: "refused"}
	}
	chunk, err := parse.Parse(strings.NewReader(text), chunkName)
	if err != nil || chunk == nil {
		return &Analysis{Problem: parseProblem(err, text), NotRecognised: "refused", Invalid: true}
	}
	if line := tooDeep(chunk); line != 0 {
		return refuse(line, "the script nests more than 200 levels deep")
	}
	rewriteMethods(chunk)
	vote, problem, f, res := checkStatic(chunk)
	if vote != nil {
		vote.Reply = replyShape(chunk, res)
	}
	a = &Analysis{Vote: vote, Problem: problem}
	if problem != nil {
		a.NotRecognised = "refused"
		return a
	}
	rewriteConcat(chunk)
	proto, err := compile(chunk)
	if err != nil {
		line := 1
		var ce *glua.CompileError
		if errors.As(err, &ce) {
			line = ce.Line
		}
		a := refuse(line, "the script does not compile: "+err.Error())
		a.Invalid = true
		return a
	}
	a.proto = proto
	var refused *Problem
	a.Meaning, a.NotRecognised, refused = recognise(proto, f, vote, time.Now().Add(analyzeTime))
	if refused != nil {
		a.Vote, a.Problem = nil, refused
	}
	return a
}

func refuse(line int, reason string) *Analysis {
	return &Analysis{Problem: &Problem{Line: line, Reason: reason}, NotRecognised: "refused"}
}

func parseProblem(err error, text string) *Problem {
	var pe *parse.Error
	if !errors.As(err, &pe) {
		return &Problem{Line: 1, Reason: "the script does not parse"}
	}
	if pe.Pos.Line == parse.EOF || pe.Pos.Line < 1 {
		return &Problem{Line: strings.Count(text, "\n") + 1, Reason: "the script does not parse: " + pe.Message + " at the end"}
	}
	return &Problem{Line: pe.Pos.Line, Reason: fmt.Sprintf("the script does not parse: %s near '%s'", pe.Message, pe.Token)}
}

// prescan refuses, before parsing, text that nests deeper than Lua 5.1
// allows: brackets, blocks, runs of unary operators and chains of the
// right-associative .. and ^. The parser would otherwise spend seconds and
// hundreds of megabytes on such input.
func prescan(s string) *Problem {
	line := 1
	var depth, unary int
	chain := []int{0} // right-associative operators per bracket level
	deep := func() *Problem {
		return &Problem{Line: line, Reason: "the script nests more than 200 levels deep (chunk has too many syntax levels)"}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			i += 2
			if n := longBracket(s[i:]); n > 0 {
				end := closeLong(s, i, n)
				line += strings.Count(s[i:end], "\n")
				i = end
			} else {
				for i < len(s) && s[i] != '\n' {
					i++
				}
			}
			continue
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(s) && s[j] != c && s[j] != '\n' {
				if s[j] == '\\' && j+1 < len(s) {
					if s[j+1] == '\n' {
						line++
					}
					j++
				}
				j++
			}
			i = j + 1
			unary = 0
			continue
		case c == '[' && longBracket(s[i:]) > 0:
			end := closeLong(s, i, longBracket(s[i:]))
			line += strings.Count(s[i:end], "\n")
			i = end
			unary = 0
			continue
		case isNameStart(c):
			j := i
			for j < len(s) && (isNameStart(s[j]) || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			switch word := s[i:j]; word {
			case "function", "if", "do", "repeat":
				depth++
				chain[len(chain)-1] = 0
			case "end", "until":
				depth--
				chain[len(chain)-1] = 0
			case "not":
				unary++
			case "nil", "true", "false", "and", "or":
				unary = 0
			default:
				if keywords[word] {
					chain[len(chain)-1] = 0
				}
				unary = 0
			}
			i = j
		case c >= '0' && c <= '9' || (c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9'):
			j := i
			for j < len(s) && (isNameStart(s[j]) || s[j] == '.' || (s[j] >= '0' && s[j] <= '9') ||
				((s[j] == '+' || s[j] == '-') && strings.ContainsRune("eEpP", rune(s[j-1])))) {
				j++
			}
			i = j
			unary = 0
		default:
			switch {
			case c == '(' || c == '{' || c == '[':
				depth++
				chain = append(chain, 0)
				unary = 0
			case c == ')' || c == '}' || c == ']':
				depth--
				if len(chain) > 1 {
					chain = chain[:len(chain)-1]
				}
				chain[len(chain)-1] = 0
				unary = 0
			case strings.HasPrefix(s[i:], "..."):
				i += 2
				unary = 0
			case strings.HasPrefix(s[i:], "..") || c == '^':
				if c == '.' {
					i++
				}
				chain[len(chain)-1]++
				unary = 0
			case c == '-' || c == '#':
				unary++
			case c == '=' || c == ',' || c == ';' || c == '<' || c == '>' || c == '~':
				chain[len(chain)-1] = 0
				unary = 0
			default:
				unary = 0
			}
			i++
		}
		if depth > maxLevels || unary > maxLevels || chain[len(chain)-1] > maxLevels || len(chain) > maxLevels+1 {
			return deep()
		}
	}
	return nil
}

var keywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true, "false": true,
	"for": true, "function": true, "if": true, "in": true, "local": true, "nil": true, "not": true,
	"or": true, "repeat": true, "return": true, "then": true, "true": true, "until": true, "while": true,
}

func isNameStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// longBracket returns the length of an opening long bracket ([[, [=[, …) at
// the start of s, or 0.
func longBracket(s string) int {
	if len(s) < 2 || s[0] != '[' {
		return 0
	}
	j := 1
	for j < len(s) && s[j] == '=' {
		j++
	}
	if j < len(s) && s[j] == '[' {
		return j + 1
	}
	return 0
}

// closeLong returns the index after the long bracket opened at s[i:] with
// an opening of n bytes closes (or len(s)).
func closeLong(s string, i, n int) int {
	closer := "]" + strings.Repeat("=", n-2) + "]"
	if k := strings.Index(s[i+n:], closer); k >= 0 {
		return i + n + k + len(closer)
	}
	return len(s)
}

// tooDeep returns the line of a node nested more than maxLevels deep in the
// syntax tree, or 0. The prescan bounds brackets and blocks; this also
// catches long left-associative chains (a.b.c…, 1+1+…), which the analysis
// and the compiler walk recursively.
func tooDeep(chunk []ast.Stmt) (line int) {
	walkTree(chunk, func(n any, d int) (ast.Expr, action) {
		if d > maxLevels+1 {
			line = n.(ast.PositionHolder).Line()
			return nil, walkStop
		}
		return nil, walkOn
	})
	return line
}
