package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// execWrites returns the places in Go source src that write KV ax_execs
// themselves: a write method on a bucket handle named Execs, a purge
// (purgeKey) or subject (kvSubject, streams.KVSubject) of
// protocol.BucketExecs, or a "$KV." subject built with it.
func execWrites(t *testing.T, name, src string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	mentionsExecs := func(n ast.Node) bool {
		found := false
		ast.Inspect(n, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "BucketExecs" {
				found = true
			}
			return !found
		})
		return found
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			switch fn := n.Fun.(type) {
			case *ast.SelectorExpr:
				if x, ok := fn.X.(*ast.SelectorExpr); ok && x.Sel.Name == "Execs" {
					switch fn.Sel.Name {
					case "Put", "PutString", "Update", "Create", "Delete", "Purge":
						out = append(out, fset.Position(n.Pos()).String()+": Execs."+fn.Sel.Name)
					}
				}
				if (fn.Sel.Name == "purgeKey" || fn.Sel.Name == "KVSubject") && mentionsExecs(n) {
					out = append(out, fset.Position(n.Pos()).String()+": "+fn.Sel.Name+" of ax_execs")
				}
			case *ast.Ident:
				if (fn.Name == "kvSubject" || fn.Name == "purgeKey") && mentionsExecs(n) {
					out = append(out, fset.Position(n.Pos()).String()+": "+fn.Name+" of ax_execs")
				}
			}
		case *ast.BinaryExpr:
			if lit, ok := n.X.(*ast.BasicLit); ok && strings.Contains(lit.Value, "$KV.") && mentionsExecs(n) {
				out = append(out, fset.Position(n.Pos()).String()+": raw $KV subject of ax_execs")
				return false
			}
			if b, ok := n.X.(*ast.BinaryExpr); ok {
				if lit, ok := b.X.(*ast.BasicLit); ok && strings.Contains(lit.Value, "$KV.") && mentionsExecs(n) {
					out = append(out, fset.Position(n.Pos()).String()+": raw $KV subject of ax_execs")
					return false
				}
			}
		}
		return true
	})
	return out
}

// TestOneExecWriter: the execution store (package execstore) is the only
// code of the controller and its packages that writes KV ax_execs. The check itself is shown to
// flag the writes the report lanes and the sweeper made before the store
// existed.
func TestOneExecWriter(t *testing.T) {
	old := `package controller
func (l *lane) writeAsync(g *group) {
	m := &nats.Msg{Subject: "$KV." + protocol.BucketExecs + "." + g.id}
	_ = m
}
func (c *Controller) retireExec(ctx context.Context, id string) {
	seq, err := c.purgeKey(ctx, protocol.BucketExecs, id, v.rev)
	_ = kvSubject(protocol.BucketExecs, id)
	c.kv.Execs.Update(ctx, id, nil, 1)
}`
	if got := execWrites(t, "old.go", old); len(got) != 4 {
		t.Fatalf("the check found %d writes in the old code, want 4: %v", len(got), got)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := filepath.Glob("*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(files, sub...) {
		if strings.HasSuffix(name, "_test.go") || filepath.Dir(name) == "execstore" {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range execWrites(t, name, string(src)) {
			t.Errorf("%s writes ax_execs outside the execution store", w)
		}
	}
}
