package jobclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/models"
)

// Submission is one valid spec, ready to publish.
type Submission struct {
	// Line is the line of its input the spec starts on, counting from 1;
	// 0 for a spec that did not come from a file.
	Line int
	// ID is the job id, sent as Nats-Msg-Id.
	ID string
	// Kind decides the subject, sluice.jobs.<kind>.
	Kind jobspec.Kind
	// Tenant, when set, publishes the job on its tenant subject,
	// sluice.jobs.<kind>.t.<tenant> (docs/tenants.md#who-may-act-for-a-tenant).
	Tenant string
	// Data is the spec as published: the producer's document, with the
	// id written into it when it had none.
	Data []byte
	// GeneratedID reports that the id was generated: publishing the same
	// input again makes a new job.
	GeneratedID bool
	// UnknownModel is the video's model when the catalog does not name
	// it: the spec was checked against the catalog's default entry.
	UnknownModel string
}

// IDFunc returns a fresh job id for a kind, for example NewID with a
// clock and a source of randomness.
type IDFunc func(kind string) (string, error)

// NewSubmission validates data with jobspec.DecodeWith against the model
// catalog cat and returns it ready to publish. A spec without an id gets
// one from newID, written into the document. A spec that breaks a rule
// gives the *jobspec.Error, with a Submission that carries only the spec's
// id, when that id is valid.
func NewSubmission(data []byte, newID IDFunc, cat *models.Catalog) (Submission, error) {
	spec, err := jobspec.DecodeWith(data, "", cat)
	if err != nil {
		if spec != nil {
			return Submission{ID: spec.ID}, err
		}
		return Submission{}, err
	}
	sub := Submission{ID: spec.ID, Kind: spec.Kind, Data: data}
	if spec.Video != nil && !spec.Video.ModelKnown(cat) {
		sub.UnknownModel = spec.Video.Model
	}
	if sub.ID != "" {
		return sub, nil
	}
	id, err := newID(string(spec.Kind))
	if err != nil {
		return Submission{}, err
	}
	withID, err := InsertMember(data, "id", id)
	if err != nil {
		return Submission{}, err
	}
	// The document changed: check it as the worker will see it.
	if _, err := jobspec.DecodeWith(withID, spec.Kind, cat); err != nil {
		return Submission{}, err
	}
	sub.ID, sub.Data, sub.GeneratedID = id, withID, true
	return sub, nil
}

// InsertMember writes name: value as the first member of the JSON object
// data, which has at least one member and no member name (the id a spec
// lacks, the tenant of the HTTP API's key). The rest of the document keeps
// its bytes.
func InsertMember(data []byte, name, value string) ([]byte, error) {
	i := bytes.IndexByte(data, '{')
	if i < 0 {
		return nil, errors.New("spec is not a JSON object")
	}
	member, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(data)+len(member)+len(name)+4)
	out = append(out, data[:i+1]...)
	out = append(out, strconv.Quote(name)...)
	out = append(out, ':')
	out = append(out, member...)
	out = append(out, ',')
	out = append(out, data[i+1:]...)
	return out, nil
}

// InvalidSpec is a spec of an input that breaks a rule.
type InvalidSpec struct {
	// Line is the line the spec starts on, counting from 1.
	Line int
	// ID is the spec's id when it has a valid one.
	ID string
	// Err is the *jobspec.Error listing the problems.
	Err error
}

// Error reads "line 3 (id clip-3): video.parameters.duration: must be ...".
func (e *InvalidSpec) Error() string {
	s := "line " + strconv.Itoa(e.Line)
	if e.ID != "" {
		s += " (id " + e.ID + ")"
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the *jobspec.Error.
func (e *InvalidSpec) Unwrap() error { return e.Err }

// Problems lists the broken rules, or nil when Err is not a *jobspec.Error.
func (e *InvalidSpec) Problems() []jobspec.Problem {
	var je *jobspec.Error
	if errors.As(e.Err, &je) {
		return je.Problems
	}
	return nil
}

// ErrNoSpecs is returned by ReadSpecs for an input without any spec.
var ErrNoSpecs = errors.New("no job spec in the input")

// ReadSpecs reads job specs from r and validates every one of them
// against the model catalog cat. The
// input is either one JSON document, which may span many lines, or any
// number of documents one per line (NDJSON; blank lines are skipped). It
// is NDJSON when its first non-blank line is a complete JSON value by
// itself.
//
// Valid specs come back in input order with ids written into those that
// had none; the others come back as InvalidSpecs, as does a spec repeating
// an id seen on an earlier line. The error is for reading r, or ErrNoSpecs.
func ReadSpecs(r io.Reader, newID IDFunc, cat *models.Catalog) ([]Submission, []*InvalidSpec, error) {
	all, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read specs: %w", err)
	}
	all = bytes.TrimPrefix(all, []byte("\xef\xbb\xbf"))
	lines := bytes.Split(all, []byte("\n"))
	first := -1
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) > 0 {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, nil, ErrNoSpecs
	}
	type doc struct {
		line int
		data []byte
	}
	var docs []doc
	if json.Valid(lines[first]) {
		for i := first; i < len(lines); i++ {
			if l := bytes.TrimSpace(lines[i]); len(l) > 0 {
				docs = append(docs, doc{line: i + 1, data: l})
			}
		}
	} else {
		docs = append(docs, doc{line: first + 1, data: bytes.TrimSpace(all)})
	}

	var subs []Submission
	var invalid []*InvalidSpec
	seen := make(map[string]int)
	for _, d := range docs {
		sub, err := NewSubmission(d.data, newID, cat)
		if err != nil {
			var je *jobspec.Error
			if !errors.As(err, &je) {
				return nil, nil, fmt.Errorf("line %d: %w", d.line, err)
			}
			invalid = append(invalid, &InvalidSpec{Line: d.line, ID: sub.ID, Err: err})
			continue
		}
		if prev, dup := seen[sub.ID]; dup {
			invalid = append(invalid, &InvalidSpec{Line: d.line, ID: sub.ID, Err: &jobspec.Error{Problems: []jobspec.Problem{{
				Path: "id", Rule: fmt.Sprintf("repeats the id of the spec on line %d", prev),
			}}}})
			continue
		}
		seen[sub.ID] = d.line
		sub.Line = d.line
		subs = append(subs, sub)
	}
	return subs, invalid, nil
}
