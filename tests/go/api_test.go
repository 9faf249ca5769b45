package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// apiFile is the exported API of the module's packages, one declaration
// a line, checked in so that a change of it is deliberate.
const apiFile = "../../api.txt"

// regenerateAPI is the command that rewrites apiFile.
const regenerateAPI = "RHEO_UPDATE_API=1 go test -run TestAPI ./tests/go"

// TestAPI compares the exported API of every package of the module
// (internal ones, tests and commands aside) with api.txt, and fails on
// any difference, naming the lines that differ and the command that
// regenerates the file. The API is read from the compiler's export data,
// as go build writes it, through go/types.
func TestAPI(t *testing.T) {
	got := exportedAPI(t)
	if os.Getenv("RHEO_UPDATE_API") != "" {
		require.NoError(t, os.WriteFile(apiFile, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(apiFile)
	require.NoError(t, err, "regenerate it with: %s", regenerateAPI)
	if string(want) == got {
		return
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	var diff []string
	for _, l := range wantLines {
		if !slices.Contains(gotLines, l) {
			diff = append(diff, "- "+l)
		}
	}
	for _, l := range gotLines {
		if !slices.Contains(wantLines, l) {
			diff = append(diff, "+ "+l)
		}
	}
	require.FailNow(t, fmt.Sprintf("the exported API differs from api.txt (- removed, + added):\n%s\n\n"+
		"If the change is deliberate, regenerate the file and commit it:\n\t%s",
		strings.Join(diff, "\n"), regenerateAPI))
}

// exportedAPI lists the exported API of the module's public packages.
func exportedAPI(t *testing.T) string {
	cmd := exec.Command("go", "list", "-export", "-deps",
		"-f", "{{.ImportPath}}\t{{.Export}}\t{{.Name}}\t{{.Module}}\t{{.DepOnly}}", "../../...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err)
	exports := map[string]string{}
	var public []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		path, export, name, module, depOnly := f[0], f[1], f[2], f[3], f[4] == "true"
		exports[path] = export
		if depOnly || !strings.HasPrefix(module, "github.com/rheo-go/rheo") || name == "main" ||
			strings.Contains(path, "/internal/") || strings.Contains(path, "/tests/") {
			continue
		}
		public = append(public, path)
	}
	sort.Strings(public)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var b strings.Builder
	for _, path := range public {
		pkg, err := imp.Import(path)
		require.NoError(t, err, path)
		writePackageAPI(&b, pkg)
	}
	return b.String()
}

// writePackageAPI writes one line per exported declaration of pkg:
// constants with their value, variables, functions, types, the exported
// fields of structs, the methods of interfaces and the method sets of
// the other named types (promoted methods included).
func writePackageAPI(b *strings.Builder, pkg *types.Package) {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Name()
	}
	fmt.Fprintf(b, "package %s\n", pkg.Path())
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			fmt.Fprintf(b, "\t%s = %s\n", types.ObjectString(obj, qual), obj.Val().ExactString())
		case *types.TypeName:
			writeTypeAPI(b, obj, qual)
		default:
			fmt.Fprintf(b, "\t%s\n", types.ObjectString(obj, qual))
		}
	}
}

// writeTypeAPI writes a type's declaration, its exported fields or
// interface methods, and its exported methods.
func writeTypeAPI(b *strings.Builder, obj *types.TypeName, qual types.Qualifier) {
	if obj.IsAlias() {
		fmt.Fprintf(b, "\ttype %s = %s\n", obj.Name(), types.TypeString(obj.Type(), qual))
		return
	}
	named := obj.Type().(*types.Named)
	switch u := named.Underlying().(type) {
	case *types.Struct:
		fmt.Fprintf(b, "\ttype %s%s struct\n", obj.Name(), typeParams(named, qual))
		for i := 0; i < u.NumFields(); i++ {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			embedded := ""
			if f.Embedded() {
				embedded = " (embedded)"
			}
			tag := ""
			if u.Tag(i) != "" {
				tag = " `" + u.Tag(i) + "`"
			}
			fmt.Fprintf(b, "\t\tfield %s %s%s%s\n", f.Name(), types.TypeString(f.Type(), qual), tag, embedded)
		}
	case *types.Interface:
		fmt.Fprintf(b, "\ttype %s%s interface\n", obj.Name(), typeParams(named, qual))
		for i := 0; i < u.NumEmbeddeds(); i++ {
			fmt.Fprintf(b, "\t\tembeds %s\n", types.TypeString(u.EmbeddedType(i), qual))
		}
		for i := 0; i < u.NumExplicitMethods(); i++ {
			m := u.ExplicitMethod(i)
			fmt.Fprintf(b, "\t\tmethod %s%s\n", m.Name(), strings.TrimPrefix(types.TypeString(m.Type(), qual), "func"))
		}
		return
	default:
		fmt.Fprintf(b, "\ttype %s%s %s\n", obj.Name(), typeParams(named, qual), types.TypeString(u, qual))
	}
	values := types.NewMethodSet(named)
	mset := types.NewMethodSet(types.NewPointer(named))
	for i := 0; i < mset.Len(); i++ {
		m := mset.At(i).Obj().(*types.Func)
		if !m.Exported() {
			continue
		}
		recv := "*" + obj.Name()
		if values.Lookup(m.Pkg(), m.Name()) != nil {
			recv = obj.Name()
		}
		fmt.Fprintf(b, "\t\tmethod (%s) %s%s\n", recv, m.Name(), strings.TrimPrefix(types.TypeString(m.Type(), qual), "func"))
	}
}

// typeParams is a generic type's parameter list, or "".
func typeParams(named *types.Named, qual types.Qualifier) string {
	tp := named.TypeParams()
	if tp.Len() == 0 {
		return ""
	}
	var ps []string
	for i := 0; i < tp.Len(); i++ {
		p := tp.At(i)
		ps = append(ps, p.Obj().Name()+" "+types.TypeString(p.Constraint(), qual))
	}
	return "[" + strings.Join(ps, ", ") + "]"
}
