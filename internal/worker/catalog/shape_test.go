package catalog

import (
	"reflect"
	"strings"
	"testing"
)

// TestShapesMatchSpec: the shapes checkShape walks list the keys of the
// spec types the file is decoded into, in the same order, with a shape that
// fits each field's type.
func TestShapesMatchSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		shape *shape
		typ   reflect.Type
	}{
		{"file", fileShape, reflect.TypeFor[fileSpec]()},
		{"tool", toolShape, reflect.TypeFor[toolSpec]()},
		{"retry", retryShape, reflect.TypeFor[retrySpec]()},
		{"per_key", perKeyShape, reflect.TypeFor[perKeySpec]()},
		{"hints", hintsShape, reflect.TypeFor[hintsSpec]()},
		{"cache", cacheShape, reflect.TypeFor[cacheSpec]()},
		{"webhook", webhookShape, reflect.TypeFor[webhookSpec]()},
		{"exec", execShape, reflect.TypeFor[execSpec]()},
		{"mcp", mcpShape, reflect.TypeFor[mcpSpec]()},
	} {
		if tc.typ.NumField() != len(tc.shape.fields) {
			t.Errorf("%s: %d fields, %d keys in the shape", tc.name, tc.typ.NumField(), len(tc.shape.fields))
			continue
		}
		for i := range tc.typ.NumField() {
			sf, key := tc.typ.Field(i), tc.shape.fields[i]
			if tag := strings.Split(sf.Tag.Get("yaml"), ",")[0]; tag != key.key {
				t.Errorf("%s: field %s is %q in the file, the shape's key %d is %q", tc.name, sf.Name, tag, i, key.key)
			}
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			var want shapeKind
			switch ft.Kind() {
			case reflect.Struct:
				want = shapeMapping
				if ft.Name() == "Node" {
					want = shapeAny
				}
			case reflect.Slice:
				want = shapeList
			case reflect.Map:
				want = shapeStringMap
			default:
				want = shapeScalar
				if got := reflect.TypeOf(key.shape.target()).Elem(); got != ft {
					t.Errorf("%s.%s: the shape decodes into %v, the spec has %v", tc.name, key.key, got, ft)
				}
			}
			if key.shape.kind != want {
				t.Errorf("%s.%s: shape kind %d, want %d for %v", tc.name, key.key, key.shape.kind, want, sf.Type)
			}
		}
	}
}

// A problem's field is the exact path of the node it was found at, also
// in flow style and JSON, where many values share a line.
func TestShapeErrorPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"tools.json", `{"tools": [{"name": "x", "description": "d", "backend": "exec", "exec": {"command": "cat"}}]}`,
			`tools.json:1: tool "x": exec.command: must be a list of strings, not "cat"`},
		{"tools.yaml", "tools:\n  - name: run\n    backend: exec\n    exec:\n      command: [cat, [x]]\n",
			`tools.yaml:5: tool "run": exec.command[1]: must be a string, not a list`},
		{"tools.yaml", "tools:\n  - name: a\n    backend: builtin\n  - [a]\n",
			`tools.yaml:4: tool #2: must be a mapping, not a list`},
		{"tools.yaml", "tools:\n  - name: a\n    backend: builtin\n    <<: {bogus: 2}\n",
			`tools.yaml:4: tool "a": bogus: unknown key (known keys: name,`},
		{"tools.yaml", "tools:\n  - name: a\n    backend: builtin\n    concurrency: 99999999999999999999\n",
			`tools.yaml:4: tool "a": concurrency: must be an integer, not "99999999999999999999"`},
	} {
		_, err := Parse(tc.name, []byte(tc.src), Options{})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}
