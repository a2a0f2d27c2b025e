package jobspec

import (
	"errors"
	"strconv"
	"strings"
)

// ErrInvalidSpec matches every *Error with errors.Is: the spec breaks a rule
// and must never reach upstream.
var ErrInvalidSpec = errors.New("jobspec: invalid job spec")

// Problem is one broken rule of a spec.
type Problem struct {
	// Path names the field, in the document's own spelling:
	// "video.input.media[3]", "labels.campaign", `labels["a b"]`. It is
	// empty for the document as a whole.
	Path string
	// Rule says what the field must be, for example "required" or
	// "must be one of 768P, 2K".
	Rule string
}

// String returns "path: rule", or only the rule when Path is empty.
func (p Problem) String() string {
	if p.Path == "" {
		return p.Rule
	}
	return p.Path + ": " + p.Rule
}

// maxErrorProblems bounds how many problems Error() spells out, so a
// hostile document cannot produce a megabyte-long error line.
const maxErrorProblems = 20

// Error is the error Decode and Validate return for a spec that breaks
// rules. It lists every problem found, in document order as far as
// possible; it is matched with errors.As, and errors.Is(err, ErrInvalidSpec)
// holds.
type Error struct {
	// Problems has at least one element.
	Problems []Problem
}

// Error joins the problems as "path: rule; path: rule". Beyond the first 20
// it only says how many more there are.
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i == maxErrorProblems {
			b.WriteString("; and ")
			b.WriteString(strconv.Itoa(len(e.Problems) - i))
			b.WriteString(" more problems")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports whether target is ErrInvalidSpec.
func (e *Error) Is(target error) bool { return target == ErrInvalidSpec }

// problems collects Problems; the zero value is ready to use.
type problems struct {
	list []Problem
	// deps maps an index of list to the fields its rule was judged on
	// besides its own (see merge).
	deps map[int][]string
}

func (ps *problems) add(path, rule string) {
	ps.list = append(ps.list, Problem{Path: path, Rule: rule})
}

// addDep adds a problem whose rule depends on the fields deps as well, so
// that it is dropped when one of those failed to decode.
func (ps *problems) addDep(path, rule string, deps ...string) {
	if ps.deps == nil {
		ps.deps = map[int][]string{}
	}
	ps.deps[len(ps.list)] = deps
	ps.add(path, rule)
}

// err returns nil when nothing was collected, else an *Error.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return &Error{Problems: ps.list}
}

// merge appends the validation problems vs to the decoding problems ds,
// leaving out a validation problem whose field (or an enclosing field)
// already has a decoding problem: a field that failed to decode is zero, and
// "required" on top of "must be a string" says nothing new. For the same
// reason it leaves out a problem whose rule depends on a field that failed
// to decode, in whole or in part ("ratio required for text-to-video" when
// the media array was not an array).
func merge(ds []Problem, vs problems) []Problem {
	if len(ds) == 0 {
		return vs.list
	}
	seen := make(map[string]bool, len(ds))
	touched := map[string]bool{}
	for _, p := range ds {
		if p.Path == "" {
			continue
		}
		seen[p.Path] = true
		touched[p.Path] = true
		for i := 1; i < len(p.Path); i++ {
			if p.Path[i] == '.' || p.Path[i] == '[' {
				touched[p.Path[:i]] = true
			}
		}
	}
	out := ds
next:
	for i, p := range vs.list {
		if covered(seen, p.Path) {
			continue
		}
		for _, dep := range vs.deps[i] {
			if touched[dep] || covered(seen, dep) {
				continue next
			}
		}
		out = append(out, p)
	}
	return out
}

// covered reports whether path or one of its enclosing paths is in seen.
func covered(seen map[string]bool, path string) bool {
	if seen[path] {
		return true
	}
	for i := 1; i < len(path); i++ {
		if (path[i] == '.' || path[i] == '[') && seen[path[:i]] {
			return true
		}
	}
	return false
}

// field returns the path of member name inside parent: parent.name for a
// plain name, parent["name"] otherwise (quoted, and cut to 64 bytes so a
// hostile key cannot blow up the message).
func field(parent, name string) string {
	if plainName(name) {
		if parent == "" {
			return name
		}
		return parent + "." + name
	}
	return parent + "[" + quote(name) + "]"
}

// index returns the path of element i of array parent.
func index(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

func plainName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// quote quotes s for a message, cut to 64 bytes on a rune boundary.
func quote(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !runeStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }
