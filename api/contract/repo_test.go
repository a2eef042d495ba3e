package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Defined once: no Go source of the repository but this package spells the
// CNI version or a standard attribute name. In code (not _test.go files) no
// string literal may be the CNI version or contain a standard attribute name;
// in tests, where literals are mostly data (configurations, expected
// attributes), no constant or variable may be declared with one. Generated
// code, testdata and YAML are not looked at. The one exception is the list
// of versions the plugins accept (version.PluginSupports), which is a range,
// not the version netclass renders; TestCNIVersion holds it to CNIVersion.
func TestDefinedOnce(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	attrs := []string{AttributeStdPodNetwork, AttributeStdPodNetworkNamespace, AttributeStdNetworkClass}
	redefines := func(s string, inCode bool) bool {
		if s == CNIVersion {
			return true
		}
		for _, a := range attrs {
			if s == a || inCode && strings.Contains(s, a) {
				return true
			}
		}
		return false
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == here, path == filepath.Join(root, "api", "generated"),
				name == "testdata", name == "bin", strings.HasPrefix(name, ".") && path != root:
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, path)
		report := func(lit *ast.BasicLit) {
			t.Errorf("%s:%d: %s is declared in api/contract; use the constant", rel, fset.Position(lit.Pos()).Line, lit.Value)
		}
		if strings.HasSuffix(path, "_test.go") {
			ast.Inspect(f, func(n ast.Node) bool {
				if spec, ok := n.(*ast.ValueSpec); ok {
					for _, v := range spec.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING && redefines(unquote(lit), false) {
							report(lit)
						}
					}
				}
				return true
			})
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "PluginSupports" {
					return false
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && redefines(unquote(n), true) {
					report(n)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("looked at %d Go files under %s: not the repository", files, root)
	}
}

func unquote(lit *ast.BasicLit) string {
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return lit.Value
	}
	return s
}
