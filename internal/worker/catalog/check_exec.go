package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// execRules are the checks of an exec entry: it defines its tool, and its
// exec section says what command runs the calls.
var execRules = backendRules{
	section: func(s *toolSpec) bool { return s.Exec != nil },
	defines: true,
	check: func(p *parser, e *Entry, s *toolSpec) (string, error) {
		ex, field, err := p.checkExec(s.Exec)
		if err != nil {
			return "exec." + field, err
		}
		e.Exec = ex
		return "", nil
	},
}

// checkExec checks an exec section (or an mcp entry's command and dir)
// and names the faulty field by its path from the section.
func (p *parser) checkExec(s *execSpec) (*ExecConfig, string, error) {
	ex := &ExecConfig{TermGrace: TermGraceDefault, MaxOutputBytes: MaxOutputBytesDefault}
	if len(s.Command) == 0 || strings.TrimSpace(s.Command[0]) == "" {
		return nil, "command", errors.New("is required: the program and its arguments, as a list (no shell)")
	}
	for i, arg := range s.Command {
		if strings.ContainsRune(arg, 0) {
			return nil, fmt.Sprintf("command[%d]", i), errors.New("contains a NUL byte")
		}
	}
	prog, err := p.resolveProgram(s.Command[0])
	if err != nil {
		return nil, "command[0]", err
	}
	ex.Command = append([]string{prog}, s.Command[1:]...)
	for i, name := range s.Env {
		if !envNameRE.MatchString(name) {
			return nil, fmt.Sprintf("env[%d]", i), fmt.Errorf("%q is not an environment variable name; list names only, not NAME=value", name)
		}
	}
	ex.Env = append([]string(nil), s.Env...)
	if s.Dir != nil {
		dir := p.relative(*s.Dir)
		st, err := os.Stat(dir)
		switch {
		case err != nil:
			return nil, "dir", fmt.Errorf("%q cannot be used: %s", *s.Dir, pathErrText(err))
		case !st.IsDir():
			return nil, "dir", fmt.Errorf("%q is not a directory", *s.Dir)
		}
		ex.Dir = dir
	}
	if s.TermGrace != nil {
		d, err := parseDuration(*s.TermGrace)
		switch {
		case err != nil:
			return nil, "term_grace", err
		case d <= 0 || d > TermGraceMax:
			return nil, "term_grace", fmt.Errorf("must be positive and at most %s, got %s", TermGraceMax, *s.TermGrace)
		}
		ex.TermGrace = d
	}
	if s.MaxOutputBytes != nil {
		if n := *s.MaxOutputBytes; n < 1 || n > MaxOutputBytesMax {
			return nil, "max_output_bytes", fmt.Errorf("must be between 1 and %d, got %d", MaxOutputBytesMax, n)
		}
		ex.MaxOutputBytes = *s.MaxOutputBytes
	}
	return ex, "", nil
}

// relative resolves a path of the file relative to the file's directory.
func (p *parser) relative(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(filepath.Dir(p.file), path)
}

// resolveProgram finds the program to run: a path with a slash is taken
// relative to the catalog file's directory; a bare name is looked up in PATH.
func (p *parser) resolveProgram(prog string) (string, error) {
	if !strings.ContainsRune(prog, '/') {
		path, err := p.opts.LookPath(prog)
		if err != nil {
			return "", fmt.Errorf("%q is not found in PATH; give its full path", prog)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", err
		}
		return abs, nil
	}
	path := p.relative(prog)
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q cannot be used: %s", prog, pathErrText(err))
	case st.IsDir():
		return "", fmt.Errorf("%q is a directory, not a program", prog)
	case st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%q is not executable (chmod +x it)", prog)
	}
	return abs, nil
}

func lookPath(file string) (string, error) { return exec.LookPath(file) }

// pathErrText is the reason of a file-system error without the path.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
