package toolpool_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/testbin"
)

// TestAPINamesNoInternalType: the root package is the public API, and
// what it exports names no type of an internal/ package — not in a
// function's or method's signature, a struct's exported field, an
// interface's method, a variable's type, nor as the target of an alias
// (`type X = internal/….Y` exposes Y's methods and fields): a program
// outside the module could not name such a type. pkg/… and jetstream/
// types are public and fine. The package is type-checked from source,
// its imports from the export data the go command built for them.
func TestAPINamesNoInternalType(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, f := range pkgs["toolpool"].Files {
		files = append(files, f)
	}
	conf := types.Config{Importer: exportDataImporter(t, fset)}
	pkg, err := conf.Check("github.com/toolpool/toolpool", fset, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &apiWalker{seen: map[types.Type]bool{}}
	checked := 0
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		checked++
		w.object(obj)
	}
	if checked < 50 {
		t.Errorf("checked %d exported names: the walk looked in the wrong place", checked)
	}
	for _, p := range w.problems {
		t.Error(p)
	}
	if os.Getenv("TOOLPOOL_API_LIST") != "" { // the API as the walk sees it, for a reader
		t.Logf("%d exported names: %s", checked, strings.Join(pkg.Scope().Names(), " "))
	}
}

// exportDataImporter imports the root package's dependencies from the
// export data `go list -export` gives (built, or found in the build
// cache): type-checking them from source would take minutes.
func exportDataImporter(t *testing.T, fset *token.FileSet) types.Importer {
	t.Helper()
	args := append([]string{"list"}, testbin.BuildFlags()...) // the export data of the build the tests ran
	out, err := exec.Command("go", append(args, "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".")...).Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if path, file, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}

// apiWalker collects the places where the exported API names an internal
// type.
type apiWalker struct {
	seen     map[types.Type]bool
	problems []string
}

// object checks one exported declaration of the root package.
func (w *apiWalker) object(obj types.Object) {
	where := obj.Name()
	switch o := obj.(type) {
	case *types.Func:
		w.typ(where, o.Type())
	case *types.Var, *types.Const:
		w.typ(where, o.Type())
	case *types.TypeName:
		if alias, ok := o.Type().(*types.Alias); ok {
			w.alias(where, alias)
			return
		}
		named := o.Type().(*types.Named)
		w.underlying(where, named.Underlying())
		for m := range named.Methods() {
			if m.Exported() {
				w.typ(where+"."+m.Name(), m.Type())
			}
		}
	}
}

// alias checks each step of an alias chain: every type it names must be
// public.
func (w *apiWalker) alias(where string, a *types.Alias) {
	for t := types.Type(a); ; {
		next, ok := t.(*types.Alias)
		if !ok {
			w.typ(where, t)
			return
		}
		if obj := next.Obj(); obj.Pkg() != nil && internal(obj.Pkg().Path()) {
			w.problems = append(w.problems, where+" is an alias of "+obj.Pkg().Path()+"."+obj.Name())
			return
		}
		t = next.Rhs()
	}
}

// underlying checks the exported parts of a root type's definition: its
// exported (and embedded) fields, its interface's methods.
func (w *apiWalker) underlying(where string, t types.Type) {
	switch u := t.(type) {
	case *types.Struct:
		for f := range u.Fields() {
			if f.Exported() || f.Embedded() {
				w.typ(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for m := range u.Methods() {
			if m.Exported() {
				w.typ(where+"."+m.Name(), m.Type())
			}
		}
	default:
		w.typ(where, t)
	}
}

// typ reports t when it names an internal type, looking through
// composite types; named types are not followed (a root type is checked
// on its own, a public one is public).
func (w *apiWalker) typ(where string, t types.Type) {
	switch t := t.(type) {
	case *types.Alias:
		w.alias(where, t)
	case *types.Named:
		if obj := t.Obj(); obj.Pkg() != nil && internal(obj.Pkg().Path()) {
			w.problems = append(w.problems, where+" names "+obj.Pkg().Path()+"."+obj.Name())
		}
		for arg := range t.TypeArgs().Types() {
			w.typ(where, arg)
		}
	case *types.Pointer:
		w.typ(where, t.Elem())
	case *types.Slice:
		w.typ(where, t.Elem())
	case *types.Array:
		w.typ(where, t.Elem())
	case *types.Map:
		w.typ(where, t.Key())
		w.typ(where, t.Elem())
	case *types.Chan:
		w.typ(where, t.Elem())
	case *types.Signature:
		w.tuple(where, t.Params())
		w.tuple(where, t.Results())
	case *types.Tuple:
		w.tuple(where, t)
	case *types.Struct, *types.Interface:
		if !w.seen[t] {
			w.seen[t] = true
			w.underlying(where, t)
		}
	}
}

func (w *apiWalker) tuple(where string, t *types.Tuple) {
	for v := range t.Variables() {
		w.typ(where, v.Type())
	}
}

// internal reports whether path is an internal package's.
func internal(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}
