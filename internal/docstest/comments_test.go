package docstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// contractFile is the name of the contract document kept outside the
// repository; Go comments cite the docs pages that state it instead.
const contractFile = "CONTRACT" + ".md"

// TestGoCommentsNameDocsThatExist checks every comment of the Go code: a
// docs/<page>.md it names exists, and so does the heading of an #anchor
// after it; and no comment cites the contract file, which is not in the
// repository (the docs pages state the contract).
func TestGoCommentsNameDocsThatExist(t *testing.T) {
	checked := 0
	for _, path := range goFiles(t) {
		rel := filepath.ToSlash(mustRel(t, path))
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if ast.IsGenerated(f) {
			continue // its comments come from its source, checked there
		}
		for _, group := range f.Comments {
			text := group.Text()
			refs, contract := docRefs(text)
			if contract {
				t.Errorf("%s: a comment names %s, which is not in the repository; name the docs page instead: %q", rel, contractFile, firstLine(text, contractFile))
			}
			for _, ref := range refs {
				checked++
				if err := resolveDocRef(ref); err != "" {
					t.Errorf("%s: a comment names %s: %s", rel, ref, err)
				}
			}
		}
	}
	t.Logf("checked %d docs references in Go comments", checked)
	if checked < 15 {
		t.Errorf("checked only %d docs references in Go comments; the scan is broken", checked)
	}
}

var docRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])(docs/[A-Za-z0-9_./-]*\.md(?:#[A-Za-z0-9_-]+)?)`)

// docRefs returns the docs pages (with their #anchor, if any) that a
// comment's text names, and whether it cites the contract file.
func docRefs(text string) (refs []string, contract bool) {
	for _, m := range docRef.FindAllStringSubmatch(text, -1) {
		refs = append(refs, m[1])
	}
	return refs, strings.Contains(text, contractFile)
}

// resolveDocRef returns what is wrong with a docs reference ("" when
// nothing is): the page does not exist, or has no heading for the anchor.
func resolveDocRef(ref string) string {
	page, anchor, _ := strings.Cut(ref, "#")
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
	if err != nil {
		return page + " does not exist"
	}
	if anchor != "" && !slices.Contains(anchors(string(b)), anchor) {
		return page + " has no heading with anchor #" + anchor
	}
	return ""
}

func TestDocRefs(t *testing.T) {
	for _, tc := range []struct {
		text     string
		refs     []string
		contract bool
	}{
		{"see docs/events.md.", []string{"docs/events.md"}, false},
		{"(docs/cli.md#enqueue-retry)", []string{"docs/cli.md#enqueue-retry"}, false},
		{"docs/job-spec.md and docs/artifacts.md", []string{"docs/job-spec.md", "docs/artifacts.md"}, false},
		{"CONTRACT.md section 2", nil, true},
		{"mydocs/x.md is not a docs page", nil, false},
		{"nothing here", nil, false},
	} {
		refs, contract := docRefs(tc.text)
		if !slices.Equal(refs, tc.refs) || contract != tc.contract {
			t.Errorf("docRefs(%q) = %q, %v; want %q, %v", tc.text, refs, contract, tc.refs, tc.contract)
		}
	}
}

func TestResolveDocRef(t *testing.T) {
	for ref, ok := range map[string]bool{
		"docs/events.md":                true,
		"docs/cli.md#enqueue-retry":     true,
		"docs/nosuchpage.md":            false,
		"docs/cli.md#no-such-heading":   false,
		"docs/job-spec.md#the-job-spec": true,
	} {
		if got := resolveDocRef(ref) == ""; got != ok {
			t.Errorf("resolveDocRef(%q) = %q; want ok %v", ref, resolveDocRef(ref), ok)
		}
	}
}

// firstLine returns the line of text that holds s.
func firstLine(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// goFiles returns every Go file of the repository, tests included, outside
// hidden, testdata and build-output directories.
func goFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "dist" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d Go files", len(files))
	}
	return files
}

func mustRel(t *testing.T, path string) string {
	t.Helper()
	rel, err := filepath.Rel(root, path)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}
