package lua

import (
	"fmt"
	"slices"

	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// compile turns the checked syntax tree into the function the sandbox runs.
func compile(chunk []ast.Stmt) (proto *glua.FunctionProto, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return glua.Compile(chunk, chunkName)
}

// rewriteConcat replaces every a .. b in the tree by a call of the
// sandbox's counting concatenation, so that no chain of .. can build
// strings past the byte budget (the interpreter's own concatenation cannot
// be metered). The call yields one value, as .. does.
func rewriteConcat(chunk []ast.Stmt) {
	walkTree(chunk, func(n any, _ int) (ast.Expr, action) {
		x, ok := n.(*ast.StringConcatOpExpr)
		if !ok {
			return nil, walkOn
		}
		fn := &ast.IdentExpr{Value: concatName}
		fn.SetLine(x.Line())
		call := &ast.FuncCallExpr{Func: fn, Args: []ast.Expr{x.Lhs, x.Rhs}, AdjustRet: true}
		call.SetLine(x.Line())
		call.SetLastLine(x.LastLine())
		return call, walkOn
	})
}

// stringFuncs are string's functions a string offers as methods (dump is
// refused by its own name).
var stringFuncs = map[string]bool{"byte": true, "char": true, "find": true, "format": true, "gfind": true, "gmatch": true,
	"gsub": true, "len": true, "lower": true, "match": true, "rep": true, "reverse": true, "sub": true, "upper": true}

// rewriteMethods replaces each x:m(…) whose m is one of string's functions
// by string.m(x, …), which the analysis follows (bounds, patterns,
// recursion) and the sandbox meters, when no value of the script can be
// found under m: the script stores nothing under that name (storedNames)
// and does not call its own variable string. Such a call on a string is
// that function (a string's metatable indexes string); on anything else
// it fails either way. The script the backends run is unchanged.
func rewriteMethods(chunk []ast.Stmt) {
	stored := storedNames(chunk)
	if stored == nil {
		return
	}
	walkTree(chunk, func(n any, _ int) (ast.Expr, action) {
		x, ok := n.(*ast.FuncCallExpr)
		if !ok || x.Func != nil || !stringFuncs[x.Method] || stored[x.Method] {
			return nil, walkOn
		}
		str := &ast.IdentExpr{Value: "string"}
		key := &ast.StringExpr{Value: x.Method}
		fn := &ast.AttrGetExpr{Object: str, Key: key}
		for _, e := range []ast.Expr{str, key, fn} {
			e.SetLine(x.Line())
			e.SetLastLine(x.Line())
		}
		call := &ast.FuncCallExpr{Func: fn, Args: append([]ast.Expr{x.Receiver}, x.Args...), AdjustRet: x.AdjustRet}
		call.SetLine(x.Line())
		call.SetLastLine(x.LastLine())
		return call, walkOn
	})
}

// storedNames returns the names under which the script may store a value
// in a table by name (t.m = v, {m = v}, function t:m()), where a method
// call x:m(…) may find it; nothing else brings a function into a table
// under a name (replies, cjson and the arguments bring none). nil when
// the script may store under any name (a key it computes, rawset, a
// metatable to read or set, _G) or names a variable string.
func storedNames(chunk []ast.Stmt) map[string]bool {
	names := map[string]bool{}
	anyName := false
	key := func(k ast.Expr) {
		switch k := k.(type) {
		case *ast.StringExpr:
			names[k.Value] = true
		case *ast.NumberExpr, nil:
		default:
			anyName = true
		}
	}
	declares := func(ns []string) {
		anyName = anyName || slices.Contains(ns, "string")
	}
	walk(chunk, func(n any) {
		switch n := n.(type) {
		case *ast.IdentExpr:
			switch n.Value {
			case "rawset", "setmetatable", "getmetatable", "_G":
				anyName = true
			}
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				switch l := l.(type) {
				case *ast.AttrGetExpr:
					key(l.Key)
				case *ast.IdentExpr:
					declares([]string{l.Value})
				}
			}
		case *ast.LocalAssignStmt:
			declares(n.Names)
		case *ast.FunctionExpr:
			declares(n.ParList.Names)
		case *ast.NumberForStmt:
			declares([]string{n.Name})
		case *ast.GenericForStmt:
			declares(n.Names)
		case *ast.TableExpr:
			for _, f := range n.Fields {
				key(f.Key)
			}
		case *ast.FuncDefStmt:
			if n.Name.Method != "" {
				names[n.Name.Method] = true
			} else if a, ok := n.Name.Func.(*ast.AttrGetExpr); ok {
				key(a.Key)
			}
		}
	})
	if anyName {
		return nil
	}
	return names
}
