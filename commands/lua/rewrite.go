package lua

import (
	"fmt"

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
