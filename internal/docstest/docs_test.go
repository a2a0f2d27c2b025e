package docstest

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/cli"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/quota"
)

// root is the repository's top directory.
const root = "../.."

var sluiceVar = regexp.MustCompile(`SLUICE_[A-Z0-9_]*[A-Z0-9]`)

// TestConfigurationDocumentsEveryVariable checks that docs/configuration.md
// names every SLUICE_* variable the code reads, and none that it does not.
func TestConfigurationDocumentsEveryVariable(t *testing.T) {
	read := readVariables(t)
	if len(read) < 40 {
		t.Fatalf("found only %d SLUICE_* variables in the code; the scan is broken: %v", len(read), sortedKeys(read))
	}
	documented := map[string]bool{}
	for _, name := range sluiceVar.FindAllString(readDoc(t, "docs/configuration.md"), -1) {
		documented[name] = true
	}
	// The contract's stream and bucket names are not variables.
	for _, name := range []string{contract.JobsStream, contract.EventsStream, contract.DLQStream, contract.StateBucket, contract.TenantsBucket, quota.Bucket} {
		delete(documented, name)
	}
	for _, name := range sortedKeys(read) {
		if !documented[name] {
			t.Errorf("%s is read by %s but not documented in docs/configuration.md", name, read[name])
		}
	}
	for _, name := range sortedKeys(documented) {
		if read[name] == "" {
			t.Errorf("docs/configuration.md documents %s, which nothing reads", name)
		}
	}
}

// readVariables returns every SLUICE_* variable the code reads, each with
// where it is read: the worker's configuration (config.Config's envconfig
// tags), os.Getenv / os.LookupEnv calls with a literal name in non-test Go
// code, and ${SLUICE_*} expansions in the compose file, the Makefile and
// the shell scripts.
func readVariables(t *testing.T) map[string]string {
	t.Helper()
	read := map[string]string{}
	typ := reflect.TypeOf(config.Config{})
	for i := range typ.NumField() {
		if tag := typ.Field(i).Tag.Get("envconfig"); tag != "" {
			read[config.Prefix+"_"+tag] = "internal/config"
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." && rel != ".ci" || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "dist" || d.Name() == "data" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			for _, name := range getenvNames(t, path) {
				read[name] = rel
			}
		case strings.HasSuffix(path, ".sh") || rel == "Makefile" || rel == "docker-compose.yml" || rel == "docker-compose.cluster.yml" || rel == filepath.Join(".ci", "run"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range shellVar.FindAllSubmatch(b, -1) {
				read[string(m[1])] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return read
}

var shellVar = regexp.MustCompile(`\$\{?(SLUICE_[A-Z0-9_]*[A-Z0-9])`)

// getenvNames returns the SLUICE_* names passed as literals to a function
// named Getenv or LookupEnv in the Go file at path.
func getenvNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		var fn string
		switch x := call.Fun.(type) {
		case *ast.SelectorExpr:
			fn = x.Sel.Name
		case *ast.Ident:
			fn = x.Name
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if (fn != "Getenv" && fn != "LookupEnv") || !ok || lit.Kind != token.STRING {
			return true
		}
		if s, err := strconv.Unquote(lit.Value); err == nil && sluiceVar.MatchString(s) && sluiceVar.FindString(s) == s {
			names = append(names, s)
		}
		return true
	})
	return names
}

// TestCLIDocumentsEveryFlag checks that docs/cli.md's flag reference has a
// section for every enqueue command, and that every flag the command's
// --help lists appears in a section whose heading names the command.
func TestCLIDocumentsEveryFlag(t *testing.T) {
	commands := enqueueCommands(t)
	if len(commands) < 7 {
		t.Fatalf("enqueue --help lists %d commands: %v", len(commands), commands)
	}
	sections := flagSections(t, readDoc(t, "docs/cli.md"))
	for _, cmd := range commands {
		var own bool
		var text strings.Builder
		for _, s := range sections {
			if s.heading == "enqueue "+cmd {
				own = true
			}
			if slices.Contains(strings.FieldsFunc(s.heading, notWordRune), cmd) {
				text.WriteString(s.body)
			}
		}
		if !own {
			t.Errorf("docs/cli.md has no section \"### enqueue %s\" in its flag reference", cmd)
		}
		flags := enqueueFlags(t, cmd)
		if len(flags) < 3 {
			t.Errorf("enqueue %s --help lists only %v", cmd, flags)
		}
		for _, flag := range flags {
			if !regexp.MustCompile("`" + regexp.QuoteMeta(flag) + "[ `]").MatchString(text.String()) {
				t.Errorf("flag %s of enqueue %s is not in docs/cli.md's flag reference", flag, cmd)
			}
		}
	}
}

func notWordRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
}

type section struct{ heading, body string }

// flagSections returns the ### sections below "## Flag reference".
func flagSections(t *testing.T, doc string) []section {
	t.Helper()
	_, ref, ok := strings.Cut(doc, "\n## Flag reference\n")
	if !ok {
		t.Fatal(`docs/cli.md has no "## Flag reference"`)
	}
	if i := strings.Index(ref, "\n## "); i >= 0 {
		ref = ref[:i]
	}
	var out []section
	for _, part := range strings.Split(ref, "\n### ")[1:] {
		heading, body, _ := strings.Cut(part, "\n")
		out = append(out, section{strings.TrimSpace(heading), body})
	}
	return out
}

// runEnqueue runs the CLI in process with args and returns its stdout.
func runEnqueue(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := cli.Env{
		Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Getenv:     func(string) string { return "" },
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now,
		Rand:       strings.NewReader(strings.Repeat("x", 64)),
	}
	if code := cli.Run(context.Background(), args, env); code != cli.ExitOK {
		t.Fatalf("enqueue %v: exit %d: %s", args, code, stderr.String())
	}
	return stdout.String()
}

// enqueueCommands returns the commands "enqueue --help" lists.
func enqueueCommands(t *testing.T) []string {
	_, list, _ := strings.Cut(runEnqueue(t, "--help"), "\nCommands:\n")
	var out []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		out = append(out, strings.Fields(line)[0])
	}
	return out
}

var helpFlag = regexp.MustCompile(`(?m)^  (--?[a-z][a-z0-9-]*)`)

// enqueueFlags returns the flags "enqueue <cmd> --help" lists.
func enqueueFlags(t *testing.T, cmd string) []string {
	help := runEnqueue(t, cmd, "--help")
	_, flags, ok := strings.Cut(help, "\nFlags:\n")
	if !ok {
		t.Fatalf("enqueue %s --help has no Flags section:\n%s", cmd, help)
	}
	flags, _, _ = strings.Cut(flags, "\n\n")
	var out []string
	for _, m := range helpFlag.FindAllStringSubmatch(flags, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestLinksResolve checks every relative link of README.md and docs/*.md:
// the file or directory exists, and an #anchor names a heading of the
// target page.
func TestLinksResolve(t *testing.T) {
	pages := markdownPages(t)
	checked := 0
	for _, page := range pages {
		text := stripCode(readDoc(t, page))
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: link %q: %s does not exist", page, target, dest)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", page, target)
				continue
			}
			if !slices.Contains(anchors(readDoc(t, dest)), anchor) {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s (has %v)", page, target, dest, anchor, anchors(readDoc(t, dest)))
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d relative links; the scan is broken", checked)
	}
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// stripCode removes fenced code blocks, so that code is not read as links.
func stripCode(md string) string { return fence.ReplaceAllString(md, "") }

// anchors returns the GitHub anchors of a page's headings.
func anchors(md string) []string {
	var out []string
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(stripCode(md), -1) {
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			out = append(out, a+"-"+strconv.Itoa(n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// anchor is GitHub's anchor of a heading: lower case, punctuation other
// than - and _ dropped, spaces turned into -.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && !strings.ContainsRune("—–’“”…→", r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"Images (`make images`)":                                             "images-make-images",
		"Containers: images and the compose stack":                           "containers-images-and-the-compose-stack",
		"What sluice assumes where the upstream documents say \"not shown\"": "what-sluice-assumes-where-the-upstream-documents-say-not-shown",
		"A job's life: checkpoints, polling and cancelling":                  "a-jobs-life-checkpoints-polling-and-cancelling",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}

// markdownPages returns README.md and every page under docs/, relative to
// the repository root.
func markdownPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md"}
	found, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		rel, _ := filepath.Rel(root, f)
		pages = append(pages, filepath.ToSlash(rel))
	}
	if len(pages) < 10 {
		t.Fatalf("found only %v", pages)
	}
	return pages
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
