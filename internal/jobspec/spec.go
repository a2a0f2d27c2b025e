package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/models"
)

// MaxSpecBytes is the largest spec Decode accepts: 1 MiB.
const MaxSpecBytes = 1 << 20

// Version is the only spec version there is; an absent version means it.
const Version = 1

// Label bounds: a spec has at most MaxLabels labels; a key is 1 to
// MaxLabelKeyBytes bytes, a value at most MaxLabelValueBytes bytes.
const (
	MaxLabels          = 32
	MaxLabelKeyBytes   = 63
	MaxLabelValueBytes = 256
)

// MaxPrefixBytes bounds output.prefix.
const MaxPrefixBytes = 512

// DefaultTenant is the tenant of a spec without one; DefaultPriority the
// priority of a spec without one, in MinPriority (the most urgent) to
// MaxPriority (docs/tenants.md).
const (
	DefaultTenant   = "default"
	DefaultPriority = 3
	MinPriority     = 1
	MaxPriority     = 5
)

// priorityRule is the rule of the priority field.
const priorityRule = "must be an integer from 1 (the most urgent) to 5"

// EffectiveTenant is the spec's tenant, or DefaultTenant.
func (s *Spec) EffectiveTenant() string {
	if s == nil || s.Tenant == "" {
		return DefaultTenant
	}
	return s.Tenant
}

// EffectivePriority is the spec's priority, or DefaultPriority.
func (s *Spec) EffectivePriority() int {
	if s == nil || s.Priority == 0 {
		return DefaultPriority
	}
	return s.Priority
}

var idPattern = regexp.MustCompile(contract.IDPattern)

// ValidID reports whether id is a valid job id:
// ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$ (docs/job-spec.md#fields-and-rules).
func ValidID(id string) bool { return contract.ValidID(id) }

// JobID is the id of a job message (docs/job-spec.md): the spec's id
// when it is valid, else the message's Nats-Msg-Id when that is valid, else
// js-<stream sequence>.
func JobID(specID, msgID string, seq uint64) string {
	switch {
	case ValidID(specID):
		return specID
	case ValidID(msgID):
		return msgID
	}
	return fmt.Sprintf("js-%d", seq)
}

// Spec is one job spec (docs/job-spec.md). Exactly the section named by
// Kind is non-nil in a valid spec. json.Marshal of a decoded Spec gives a
// document that decodes to an equal Spec; absent optional fields are
// omitted.
type Spec struct {
	// Version is 1; Decode sets it to 1 when the document has none, and
	// Validate takes 0 to mean the same.
	Version int `json:"version,omitempty"`
	// ID is the optional job id, valid per ValidID.
	ID string `json:"id,omitempty"`
	// Kind names the spec's section and equals its subject's last token.
	Kind Kind `json:"kind"`
	// Tenant is who the job is for, an id as ValidID; empty means
	// DefaultTenant (docs/tenants.md).
	Tenant string `json:"tenant,omitempty"`
	// Priority is 1 (the most urgent) to 5; 0 means DefaultPriority.
	Priority int `json:"priority,omitempty"`
	// Labels are echoed in every event: at most 32 entries, keys 1 to 63
	// bytes, values at most 256 bytes.
	Labels map[string]string `json:"labels,omitempty"`
	// Output places the job's artifacts; nil means no prefix.
	Output *Output `json:"output,omitempty"`
	// Notify sends the job's events to its own webhook; nil means none.
	Notify *Notify `json:"notify,omitempty"`
	// Video is the video section, present exactly when Kind is video.
	Video *Video `json:"video,omitempty"`
	// Speech is the speech section, present exactly when Kind is speech.
	Speech *Speech `json:"speech,omitempty"`
	// Compute is the compute section, present exactly when Kind is compute.
	Compute *Compute `json:"compute,omitempty"`
	// Container is the container section, present exactly when Kind is
	// container.
	Container *Container `json:"container,omitempty"`
	// Pipeline is the pipeline section, present exactly when Kind is
	// pipeline.
	Pipeline *Pipeline `json:"pipeline,omitempty"`
}

// Output is where a job's artifacts go below the worker's S3 prefix.
type Output struct {
	// Prefix is an optional relative key prefix: no leading "/", no empty,
	// "." or ".." segment, no control character, at most 512 bytes.
	Prefix string `json:"prefix,omitempty"`
}

// Decode decodes and validates one spec that arrived for kind ("" when the
// kind is unknown; then the spec's own kind need only be valid). Every error
// it returns is an *Error listing all the problems found.
//
// Whenever data is one JSON object it also returns a best-effort *Spec, even
// alongside an error, so the caller can name the job in its failed event:
// fields that decoded are set, while ID, Kind and Labels are left zero
// unless they are valid themselves. The *Spec is nil only when data is over
// MaxSpecBytes or is not a single JSON object.
//
// Decode checks a video section against the shipped model catalog;
// DecodeWith takes the catalog in force.
func Decode(data []byte, kind Kind) (*Spec, error) {
	return DecodeWith(data, kind, shipped)
}

// shipped is the shipped model catalog, never modified.
var shipped = models.Shipped()

// DecodeWith is Decode checking a video section against cat: its model's
// entry, or the default entry for a model cat does not name. A nil cat
// checks the section's structure alone (any resolution, duration of 1 s
// or more, ratio and input kind), for a job already upstream under an
// earlier catalog.
func DecodeWith(data []byte, kind Kind, cat *models.Catalog) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, &Error{Problems: []Problem{{Rule: fmt.Sprintf("spec is %d bytes, more than the limit of %d", len(data), MaxSpecBytes)}}}
	}
	if !json.Valid(data) {
		rule := "not valid JSON"
		var syn *json.SyntaxError
		switch err := json.Unmarshal(data, new(json.RawMessage)); {
		case errors.As(err, &syn) && int(syn.Offset) >= len(bytes.TrimRight(data, " \t\r\n")):
			// A file cut short: say so rather than give a byte offset.
			rule = "not valid JSON (unexpected end of input: the spec is cut short)"
		case errors.As(err, &syn):
			rule = fmt.Sprintf("not valid JSON (syntax error at byte %d)", syn.Offset)
		}
		return nil, &Error{Problems: []Problem{{Rule: rule}}}
	}
	d := &decoder{}
	if typeOf(data) != jsonObject {
		d.add("", "must be a JSON object, got "+jsonTypeNames[typeOf(data)])
		return nil, d.err()
	}
	if !utf8.Valid(data) {
		d.add("", "not valid UTF-8")
	}
	s := &Spec{}
	s.decode(d, "", data)
	switch {
	case kind == "":
	case !kind.Valid():
		d.add("", "arrived for unknown kind "+quote(string(kind)))
	case s.Kind.Valid() && s.Kind != kind:
		d.add("kind", fmt.Sprintf("must be %q, the kind of the subject it arrived on, got %q", kind, s.Kind))
	}
	var v problems
	s.validate(&v, cat)
	all := merge(d.list, v)

	// The best effort: never hand out an id, kind or labels that break a rule.
	if !ValidID(s.ID) {
		s.ID = ""
	}
	if !s.Kind.Valid() {
		s.Kind = ""
	}
	for _, p := range all {
		if p.Path == "labels" || strings.HasPrefix(p.Path, "labels.") || strings.HasPrefix(p.Path, "labels[") {
			s.Labels = nil
			break
		}
	}
	if len(all) > 0 {
		return s, &Error{Problems: all}
	}
	return s, nil
}

func (s *Spec) decode(d *decoder, path string, raw json.RawMessage) {
	d.object(path, raw, map[string]fieldFunc{
		"version": func(p string, r json.RawMessage) {
			d.integer(p, r, &s.Version, Version, Version, "must be 1")
		},
		"id": func(p string, r json.RawMessage) {
			if d.str(p, r, &s.ID) && !ValidID(s.ID) {
				d.add(p, "must match "+idPattern.String())
			}
		},
		"kind": func(p string, r json.RawMessage) {
			var k string
			if d.str(p, r, &k) {
				s.Kind = Kind(k)
			}
		},
		"tenant": func(p string, r json.RawMessage) {
			if d.str(p, r, &s.Tenant) && !ValidID(s.Tenant) {
				d.add(p, "must be an id matching "+idPattern.String())
				s.Tenant = ""
			}
		},
		"priority": func(p string, r json.RawMessage) {
			d.integer(p, r, &s.Priority, MinPriority, MaxPriority, priorityRule)
		},
		"labels": func(p string, r json.RawMessage) {
			s.Labels, _ = d.stringMap(p, r)
		},
		"output": func(p string, r json.RawMessage) {
			o := &Output{}
			if d.object(p, r, map[string]fieldFunc{
				"prefix": func(p string, r json.RawMessage) { d.optStr(p, r, &o.Prefix) },
			}) {
				s.Output = o
			}
		},
		"notify": func(p string, r json.RawMessage) {
			n := &Notify{}
			if n.decode(d, p, r) {
				s.Notify = n
			}
		},
		"video": func(p string, r json.RawMessage) {
			v := &Video{}
			if v.decode(d, p, r) {
				s.Video = v
			}
		},
		"speech": func(p string, r json.RawMessage) {
			sp := &Speech{}
			if sp.decode(d, p, r) {
				s.Speech = sp
			}
		},
		"compute": func(p string, r json.RawMessage) {
			c := &Compute{}
			if c.decode(d, p, r) {
				s.Compute = c
			}
		},
		"container": func(p string, r json.RawMessage) {
			c := &Container{}
			if c.decode(d, p, r) {
				s.Container = c
			}
		},
		"pipeline": func(p string, r json.RawMessage) {
			pl := &Pipeline{}
			if pl.decode(d, p, r) {
				s.Pipeline = pl
			}
		},
	})
	if s.Version == 0 {
		s.Version = Version
	}
}

// Validate checks every rule of the contract on s and returns an *Error
// listing all problems, or nil. It does not need a decoded spec: the enqueue
// CLI validates the specs it builds from flags with it. Version 0 counts as
// absent, that is 1. A video section is checked against the shipped model
// catalog.
func (s *Spec) Validate() error {
	return s.ValidateWith(shipped)
}

// ValidateWith is Validate checking a video section against cat. Like
// DecodeWith it writes the video's model and resolution in cat's spelling.
func (s *Spec) ValidateWith(cat *models.Catalog) error {
	var ps problems
	s.validate(&ps, cat)
	return ps.err()
}

func (s *Spec) validate(ps *problems, cat *models.Catalog) {
	s.validateJob(ps, cat)
	for _, r := range s.refs() {
		ps.add(r.path, "an artifact reference {step, artifact} is allowed only in a pipeline step's inputs")
	}
}

// validateJob checks every rule but the artifact references, which only a
// pipeline can judge.
func (s *Spec) validateJob(ps *problems, cat *models.Catalog) {
	if s.Version != 0 && s.Version != Version {
		ps.add("version", "must be 1")
	}
	if s.ID != "" && !ValidID(s.ID) {
		ps.add("id", "must match "+idPattern.String())
	}
	switch {
	case s.Kind == "":
		ps.add("kind", "required (one of video, speech, compute, container, pipeline)")
	case !s.Kind.Valid():
		ps.add("kind", "must be one of video, speech, compute, container, pipeline, got "+quote(string(s.Kind)))
	}
	if s.Tenant != "" && !ValidID(s.Tenant) {
		ps.add("tenant", "must be an id matching "+idPattern.String())
	}
	if s.Priority != 0 && (s.Priority < MinPriority || s.Priority > MaxPriority) {
		ps.add("priority", priorityRule)
	}
	validateLabels(ps, s.Labels)
	if s.Notify != nil {
		s.Notify.validate(ps, "notify")
	}
	if s.Output != nil && s.Output.Prefix != "" {
		if rule := prefixRule(s.Output.Prefix); rule != "" {
			ps.add("output.prefix", rule)
		}
	}

	sections := []struct {
		kind    Kind
		present bool
		check   func()
	}{
		{KindVideo, s.Video != nil, func() { s.Video.validate(ps, "video", cat) }},
		{KindSpeech, s.Speech != nil, func() { s.Speech.validate(ps, "speech") }},
		{KindCompute, s.Compute != nil, func() { s.Compute.validate(ps, "compute") }},
		{KindContainer, s.Container != nil, func() { s.Container.validate(ps, "container") }},
		{KindPipeline, s.Pipeline != nil, func() { s.Pipeline.validate(ps, "pipeline", s.ID, s.Labels, cat) }},
	}
	for _, sec := range sections {
		switch {
		case sec.present && s.Kind.Valid() && sec.kind != s.Kind:
			ps.add(string(sec.kind), fmt.Sprintf("must be absent when kind is %s", s.Kind))
		case sec.present:
			sec.check()
		case sec.kind == s.Kind:
			ps.add(string(sec.kind), fmt.Sprintf("required when kind is %s", s.Kind))
		}
	}
}

func validateLabels(ps *problems, labels map[string]string) {
	if len(labels) > MaxLabels {
		ps.add("labels", fmt.Sprintf("at most %d entries, got %d", MaxLabels, len(labels)))
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		switch {
		case k == "":
			ps.add(field("labels", k), "key must not be empty")
		case len(k) > MaxLabelKeyBytes:
			ps.add(field("labels", k), fmt.Sprintf("key must be at most %d bytes", MaxLabelKeyBytes))
		}
		if len(labels[k]) > MaxLabelValueBytes {
			ps.add(field("labels", k), fmt.Sprintf("value must be at most %d bytes", MaxLabelValueBytes))
		}
	}
}

// prefixRule returns the rule output.prefix p breaks, or "".
func prefixRule(p string) string {
	switch {
	case len(p) > MaxPrefixBytes:
		return fmt.Sprintf("must be at most %d bytes", MaxPrefixBytes)
	case strings.HasPrefix(p, "/"):
		return `must be relative (no leading "/")`
	case hasControl(p):
		return "must not contain control characters"
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return `must not have an empty segment ("//" or a trailing "/")`
		case ".", "..":
			return `must not have a "." or ".." segment`
		}
	}
	return ""
}
