package script

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// The body of an enforced script is not sent as the client wrote it but
// printed again from its syntax tree, with three changes that route what
// no shadow can reach through the wrapper's checks at run time:
//
//   - every a .. b becomes __rp_cat(a, b), which bounds the string it
//     builds (Lua's own concatenation runs in the interpreter: a loop of
//     s = s .. s doubles a string each turn, past any memory);
//   - every index by a computed key, or by the name of a string function
//     that builds or matches (find, format, gfind, gmatch, gsub, match,
//     rep), becomes __rp_ix(o, k): a string's methods are then the
//     bounded library's, whatever alias the body took of them (v[k],
//     local f = v.rep, a table whose __index is a string). A string's
//     metatable is Redis's, read-only, and its __index the real string
//     library: only the index itself can be redirected;
//   - every method call by such a name, o:rep(…), becomes
//     __rp_mc(o, 'rep', …).
//
// Every other index (a literal name of no such function, a number) and
// every assignment stays as written. The printed body keeps each
// statement and expression on its line, so that errors name the lines
// the client wrote; operators are parenthesised where Lua would group
// them otherwise, strings written with decimal escapes, and each
// statement ends with ';'.

// boundedNames are the string functions an index by a literal name
// reaches through __rp_ix (their real forms build or match in C).
var boundedNames = map[string]bool{"find": true, "format": true, "gfind": true, "gmatch": true, "gsub": true, "match": true, "rep": true}

// bodyError is a body the printer cannot send (goto and labels, which
// Redis's Lua 5.1 does not know).
type bodyError string

// enforcedBody returns body printed for the enforced wrapper (see above).
func enforcedBody(body string) (out string, err error) {
	defer func() {
		// A syntax tree the printer does not expect is answered, not a
		// crash of the proxy (FuzzEnforcedBody finds none).
		if r := recover(); r != nil {
			if e, ok := r.(bodyError); ok {
				out, err = "", fmt.Errorf("%s", string(e))
				return
			}
			out, err = "", fmt.Errorf("a body it could not print: %v", r)
		}
	}()
	chunk, err := parse.Parse(strings.NewReader(body), "body")
	if err != nil {
		return "", err
	}
	p := &bodyPrinter{lines: strings.Split(body, "\n"), line: 1}
	p.block(chunk)
	return p.b.String(), nil
}

// enforcedBodyOrError is enforcedBody, or a body that answers why it
// cannot run.
func enforcedBodyOrError(body string) string {
	out, err := enforcedBody(body)
	if err != nil {
		return "return {err = " + luaQuote("ERR redlock-proxy cannot run this script by vote under its run-time check: "+err.Error()) + "}"
	}
	return out
}

type bodyPrinter struct {
	b     strings.Builder
	line  int      // the line being written
	lines []string // the body as written
}

// at starts a new line until the one being written is line.
func (p *bodyPrinter) at(line int) {
	for p.line < line {
		p.b.WriteByte('\n')
		p.line++
	}
}

// w writes its parts in order: a string as it is, an expression, a list
// of them or a block printed.
func (p *bodyPrinter) w(parts ...any) {
	for _, x := range parts {
		switch x := x.(type) {
		case string:
			p.b.WriteString(x)
		case ast.Expr:
			p.expr(x)
		case []ast.Expr:
			p.exprs(x)
		case []ast.Stmt:
			p.block(x)
		default:
			panic(fmt.Sprintf("a part it cannot write (%T)", x))
		}
	}
}

func (p *bodyPrinter) block(stmts []ast.Stmt) {
	for _, s := range stmts {
		p.stmt(s)
	}
}

func (p *bodyPrinter) stmt(st ast.Stmt) {
	p.at(st.Line())
	switch s := st.(type) {
	case *ast.AssignStmt:
		for i, e := range s.Lhs {
			if i > 0 {
				p.w(", ")
			}
			p.target(e)
		}
		p.w(" = ", s.Rhs)
	case *ast.LocalAssignStmt:
		if f, ok := oneFunction(s.Exprs); ok && len(s.Names) == 1 && p.localFunction(s.Line(), s.Names[0]) {
			p.w("local function ", declared(s.Names))
			p.funcBody(f)
			break
		}
		p.w("local ", declared(s.Names))
		if len(s.Exprs) > 0 {
			p.w(" = ", s.Exprs)
		}
	case *ast.FuncCallStmt:
		p.expr(s.Expr)
	case *ast.DoBlockStmt:
		p.w("do ", s.Stmts, " end")
	case *ast.WhileStmt:
		p.w("while ", s.Condition, " do ", s.Stmts, " end")
	case *ast.RepeatStmt:
		p.w("repeat ", s.Stmts, " until ", s.Condition)
	case *ast.IfStmt:
		p.w("if ", s.Condition, " then ", s.Then)
		if len(s.Else) > 0 {
			p.w(" else ", s.Else)
		}
		p.w(" end")
	case *ast.NumberForStmt:
		p.w("for ", declared([]string{s.Name}), " = ", s.Init, ", ", s.Limit)
		if s.Step != nil {
			p.w(", ", s.Step)
		}
		p.w(" do ", s.Stmts, " end")
	case *ast.GenericForStmt:
		// The iterator, state and control taken into locals first: the
		// same loop in Lua 5.1, and gopher-lua (miniredis, -dev) loses
		// its registers on for … in f(a)(b) (the bounded gmatch through
		// __rp_ix) and on for … in next, {…}.
		p.w("do local __rp_f, __rp_s, __rp_c = ", s.Exprs, " for ", declared(s.Names),
			" in __rp_f, __rp_s, __rp_c do ", s.Stmts, " end end")
	case *ast.FuncDefStmt:
		p.w("function ")
		if s.Name.Receiver != nil {
			p.funcName(s.Name.Receiver)
			p.w(":", s.Name.Method)
		} else {
			p.funcName(s.Name.Func)
		}
		p.funcBody(s.Func)
	case *ast.ReturnStmt:
		if len(s.Exprs) == 1 && oneValueCall(s.Exprs[0]) {
			// Not a tail call: an error the check raises names the
			// caller's line, which a tail call would have left.
			p.w("return (", s.Exprs[0], ")")
			break
		}
		p.w("return ", s.Exprs)
	case *ast.BreakStmt:
		p.w("break")
	default:
		panic(bodyError("goto and labels are not Lua 5.1"))
	}
	p.w("; ")
}

// oneFunction reports whether exprs is one function literal.
func oneFunction(exprs []ast.Expr) (*ast.FunctionExpr, bool) {
	if len(exprs) != 1 {
		return nil, false
	}
	f, ok := exprs[0].(*ast.FunctionExpr)
	return f, ok
}

// declared is names joined for a declaration. A name that begins with
// __rp_ would shadow the wrapper's functions the printed body calls
// (__rp_ix, __rp_cat, …) and the loops' locals: not printed.
func declared(names []string) string {
	for _, n := range names {
		if strings.HasPrefix(n, "__rp_") {
			panic(bodyError("it declares " + n + ": names that begin with __rp_ are redlock-proxy's"))
		}
	}
	return strings.Join(names, ", ")
}

// localFunction reports whether the body's line says local function
// name: the syntax tree does not tell it from local name = function,
// whose body does not see the name.
func (p *bodyPrinter) localFunction(line int, name string) bool {
	if line < 1 || line > len(p.lines) {
		return false
	}
	re := regexp.MustCompile(`(^|[^\w])local\s+function\s+` + regexp.QuoteMeta(name) + `([^\w]|$)`)
	return re.MatchString(p.lines[line-1])
}

// funcName is a function statement's name: a.b.c.
func (p *bodyPrinter) funcName(e ast.Expr) {
	switch e := e.(type) {
	case *ast.IdentExpr:
		p.w(declared([]string{e.Value}))
	case *ast.AttrGetExpr:
		k, ok := e.Key.(*ast.StringExpr)
		if !ok {
			panic(bodyError("a function name that is not a name"))
		}
		p.funcName(e.Object)
		p.w(".", k.Value)
	default:
		panic(bodyError("a function name that is not a name"))
	}
}

func (p *bodyPrinter) funcBody(f *ast.FunctionExpr) {
	p.w("(", declared(f.ParList.Names))
	if f.ParList.HasVargs {
		if len(f.ParList.Names) > 0 {
			p.w(", ")
		}
		p.w("...")
	}
	p.w(") ", f.Stmts, " end")
}

// target is an assignment's target: its last index stays as written.
func (p *bodyPrinter) target(e ast.Expr) {
	if a, ok := e.(*ast.AttrGetExpr); ok {
		p.at(a.Line())
		p.prefix(a.Object)
		p.w("[", a.Key, "]")
		return
	}
	p.expr(e)
}

func (p *bodyPrinter) exprs(es []ast.Expr) {
	for i, e := range es {
		if i > 0 {
			p.w(", ")
		}
		p.expr(e)
	}
}

// prefix is e where Lua wants a prefix expression (before an index or
// call's arguments): parenthesised unless it is a name, an index or a
// call.
func (p *bodyPrinter) prefix(e ast.Expr) {
	switch e.(type) {
	case *ast.IdentExpr, *ast.AttrGetExpr, *ast.FuncCallExpr:
		p.expr(e)
	default:
		p.w("(", e, ")")
	}
}

// oneValueCall reports whether e prints as a call of the check's that
// answers one value (__rp_cat, __rp_ix).
func oneValueCall(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.StringConcatOpExpr:
		return true
	case *ast.AttrGetExpr:
		return boundedKey(e.Key)
	}
	return false
}

// boundedKey reports whether an index by key goes through __rp_ix.
func boundedKey(key ast.Expr) bool {
	switch k := key.(type) {
	case *ast.NumberExpr, *ast.NilExpr, *ast.TrueExpr, *ast.FalseExpr:
		return false
	case *ast.StringExpr:
		return boundedNames[k.Value]
	}
	return true
}

func (p *bodyPrinter) expr(ex ast.Expr) {
	p.at(ex.Line())
	switch e := ex.(type) {
	case *ast.NilExpr:
		p.w("nil")
	case *ast.TrueExpr:
		p.w("true")
	case *ast.FalseExpr:
		p.w("false")
	case *ast.NumberExpr:
		p.w(number(e.Value))
	case *ast.StringExpr:
		p.w(luaQuote(e.Value))
	case *ast.Comma3Expr:
		if e.AdjustRet {
			p.w("(...)")
		} else {
			p.w("...")
		}
	case *ast.IdentExpr:
		p.w(e.Value)
	case *ast.AttrGetExpr:
		if boundedKey(e.Key) {
			p.w("__rp_ix(", e.Object, ", ", e.Key, ")")
			break
		}
		p.prefix(e.Object)
		p.w("[", e.Key, "]")
	case *ast.TableExpr:
		p.w("{")
		for i, f := range e.Fields {
			if i > 0 {
				p.w(", ")
			}
			if f.Key != nil {
				p.w("[", f.Key, "] = ")
			}
			p.expr(f.Value)
		}
		p.w("}")
	case *ast.FuncCallExpr:
		if e.AdjustRet {
			p.w("(")
		}
		switch {
		case e.Receiver != nil && boundedNames[e.Method]:
			p.w("__rp_mc(", e.Receiver, ", ", luaQuote(e.Method))
			for _, a := range e.Args {
				p.w(", ", a)
			}
			p.w(")")
		case e.Receiver != nil:
			p.prefix(e.Receiver)
			p.w(":", e.Method, "(", e.Args, ")")
		default:
			p.prefix(e.Func)
			p.w("(", e.Args, ")")
		}
		if e.AdjustRet {
			p.w(")")
		}
	case *ast.LogicalOpExpr:
		p.binary(e.Lhs, e.Operator, e.Rhs)
	case *ast.RelationalOpExpr:
		p.binary(e.Lhs, e.Operator, e.Rhs)
	case *ast.ArithmeticOpExpr:
		p.binary(e.Lhs, e.Operator, e.Rhs)
	case *ast.StringConcatOpExpr:
		// One call for a chain a .. b .. c (right-associative: the
		// chain runs down Rhs), as Lua concatenates it in one step: a
		// call per operand would nest as deep as the chain is long.
		p.w("__rp_cat(", e.Lhs)
		r := e.Rhs
		for {
			p.w(", ")
			c, ok := r.(*ast.StringConcatOpExpr)
			if !ok {
				break
			}
			p.expr(c.Lhs)
			r = c.Rhs
		}
		p.expr(r)
		p.w(")")
	case *ast.UnaryMinusOpExpr:
		p.w("- ")
		p.operand(e.Expr, precUnary, false)
	case *ast.UnaryNotOpExpr:
		p.w("not ")
		p.operand(e.Expr, precUnary, false)
	case *ast.UnaryLenOpExpr:
		p.w("#")
		p.operand(e.Expr, precUnary, false)
	case *ast.FunctionExpr:
		p.w("function")
		p.funcBody(e)
	default:
		panic(bodyError(fmt.Sprintf("an expression of a kind it does not know (%T)", ex)))
	}
}

// number is a number as the lexer read it, without its decimal leading
// zeros (the lexer drops one of them: 000 reads 00; the value is the
// same either way).
func number(v string) string {
	if strings.ContainsAny(v, "xX") {
		return v
	}
	for len(v) > 1 && v[0] == '0' && v[1] >= '0' && v[1] <= '9' {
		v = v[1:]
	}
	return v
}

// Lua 5.1's operator precedences, lowest first ('..', 4, is printed as
// a call); ^ is right-associative, the others left.
const (
	precOr    = 1
	precAnd   = 2
	precCmp   = 3
	precAdd   = 5
	precMul   = 6
	precUnary = 7
	precPow   = 8
)

var binaryPrec = map[string]int{"or": precOr, "and": precAnd, "<": precCmp, ">": precCmp, "<=": precCmp, ">=": precCmp,
	"~=": precCmp, "==": precCmp, "+": precAdd, "-": precAdd, "*": precMul, "/": precMul, "%": precMul, "^": precPow}

// prec is e's precedence as an operand: an operator's, or above every
// operator's for what needs no parentheses.
func prec(e ast.Expr) int {
	switch e := e.(type) {
	case *ast.LogicalOpExpr:
		return binaryPrec[e.Operator]
	case *ast.RelationalOpExpr:
		return binaryPrec[e.Operator]
	case *ast.ArithmeticOpExpr:
		return binaryPrec[e.Operator]
	case *ast.UnaryMinusOpExpr, *ast.UnaryNotOpExpr, *ast.UnaryLenOpExpr:
		return precUnary
	}
	return precPow + 1
}

// binary is l op r, each operand parenthesised only where Lua would
// group it otherwise: a chain a + b + c prints as written, not nested
// (Lua's parser allows 200 levels of nesting, not of chain). Spaces
// around op keep two minus signs from meeting (--, a comment).
func (p *bodyPrinter) binary(l ast.Expr, op string, r ast.Expr) {
	pr := binaryPrec[op]
	if pr == 0 {
		panic(bodyError("an operator it does not know (" + op + ")"))
	}
	p.operand(l, pr, op == "^")
	p.w(" ", op, " ")
	p.operand(r, pr, op != "^")
}

// operand prints e as an operand of an operator of precedence pr:
// parenthesised when it binds less tightly, or as tightly on the side
// that does not associate (tight: the right of a left-associative
// operator, the left of ^).
func (p *bodyPrinter) operand(e ast.Expr, pr int, tight bool) {
	ep := prec(e)
	if ep < pr || ep == pr && tight {
		p.w("(", e, ")")
		return
	}
	p.expr(e)
}
