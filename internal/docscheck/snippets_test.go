package docscheck_test

import (
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/docscheck"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	md := "# Title\n" + // 1
		"\n" + // 2
		"```sh\n" + // 3
		"echo not checked\n" + // 4
		"```\n" + // 5
		"<!-- check: as helpers -->\n" + // 6
		"```ts\n" + // 7
		"const a = 1;\n" + // 8
		"```\n" + // 9
		"<!-- check: after helpers -->\n" + // 10
		"<!-- check: prepend: declare const b: number; -->\n" + // 11
		"```typescript\n" + // 12
		"console.log(a + b);\n" + // 13
		"```\n" + // 14
		"- in a list:\n" + // 15
		"\n" + // 16
		"  ```python\n" + // 17
		"  print(1)\n" + // 18
		"  ```\n" + // 19
		"<!-- check: skip: a fragment of the loop above -->\n" + // 20
		"````js\n" + // 21
		"```\n" + // 22
		"x(\n" + // 23
		"````\n" + // 24
		"Inline ```ts code``` is no fence.\n" // 25
	got, err := docscheck.Extract("doc.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d snippets, want 4: %+v", len(got), got)
	}
	for i, want := range []struct {
		line int
		lang docscheck.Lang
		code string
	}{
		{8, docscheck.TypeScript, "const a = 1;\n"},
		{13, docscheck.TypeScript, "console.log(a + b);\n"},
		{18, docscheck.Python, "print(1)\n"},
		{22, docscheck.JavaScript, "```\nx(\n"},
	} {
		if s := got[i]; s.Line != want.line || s.Lang != want.lang || s.Code != want.code {
			t.Errorf("snippet %d = line %d %s %q, want line %d %s %q", i, s.Line, s.Lang, s.Code, want.line, want.lang, want.code)
		}
	}
	if got[0].Name != "helpers" || got[1].After[0] != "helpers" || got[1].Prepend[0] != "declare const b: number;" || got[3].Skip == "" {
		t.Errorf("directives not kept: %+v", got)
	}

	progs := docscheck.Programs(got)
	if len(progs) != 3 {
		t.Fatalf("got %d programs, want 3 (the skipped one left out)", len(progs))
	}
	p := progs[1]
	if p.Name != "doc_13.ts" || p.Source != "const a = 1;\ndeclare const b: number;\nconsole.log(a + b);\nexport {};\n" {
		t.Errorf("program of line 13: %s\n%s", p.Name, p.Source)
	}
	if p.Origins[0].String() != "doc.md:8" || p.Origins[2].String() != "doc.md:13" || p.Origins[3].Line != 0 {
		t.Errorf("origins: %v", p.Origins)
	}
	mapped := docscheck.MapDiagnostics("doc_13.ts(3,13): error TS2304: Cannot find name 'b'.\n", progs)
	if !strings.HasPrefix(mapped, "doc.md:13:13 ") {
		t.Errorf("mapped diagnostic = %q, want it to start with doc.md:13:13", mapped)
	}
	if progs[2].Source != "print(1)\n" {
		t.Errorf("python program = %q (no export line)", progs[2].Source)
	}
}

func TestExtractErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ md, want string }{
		{"<!-- check: skip -->\n```ts\nx\n```\n", "doc.md:1: check: skip needs a reason"},
		{"<!-- check: skip:   -->\n```ts\nx\n```\n", "skip needs a reason"},
		{"<!-- check: frobnicate -->\n```ts\nx\n```\n", "doc.md:1: check: unknown directive"},
		{"<!-- check: after nobody -->\n```ts\nx\n```\n", "doc.md:2: check: after nobody: no earlier ts snippet"},
		{"<!-- check: as x -->\n```python\nx\n```\n<!-- check: after x -->\n```ts\nx\n```\n", "no earlier ts snippet of this file is named x"},
		{"<!-- check: as x -->\n```ts\na\n```\n<!-- check: as x -->\n```ts\nb\n```\n", "the name is taken"},
		{"<!-- check: as a b -->\n```ts\nx\n```\n", "want one name"},
		{"<!-- check: skip: why -->\nsome text\n```ts\nx\n```\n", "doc.md:2: a check directive is not right above a code block"},
		{"<!-- check: skip: why -->\n```sh\nx\n```\n", "above a \"sh\" block, which is not checked"},
		{"```ts\nx\n", "doc.md:1: code block not closed"},
		{"text\n<!-- check: skip: why -->\n", "above no code block"},
	} {
		_, err := docscheck.Extract("doc.md", []byte(tc.md))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Extract(%q) = %v, want an error containing %q", tc.md, err, tc.want)
		}
	}
}
