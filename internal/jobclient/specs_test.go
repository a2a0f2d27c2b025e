package jobclient

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/models"
)

const validSpec = `{"id":"%s","kind":"video","video":{"model":"m","input":{"prompt":"p"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`

func spec(id string) string { return fmt.Sprintf(validSpec, id) }

// counterIDs returns an IDFunc that hands out kind-1, kind-2, ...
func counterIDs() IDFunc {
	n := 0
	return func(kind string) (string, error) {
		n++
		return fmt.Sprintf("%s-%d", kind, n), nil
	}
}

func TestReadSpecs(t *testing.T) {
	t.Parallel()
	noID := strings.Replace(spec("x"), `"id":"x",`, "", 1)
	tests := []struct {
		name    string
		in      string
		ids     []string
		lines   []int
		invalid []string // "line:path"
		err     error
	}{
		{"one spec", spec("a"), []string{"a"}, []int{1}, nil, nil},
		{"ndjson with blank lines and CRLF", "\n" + spec("a") + "\r\n\r\n" + spec("b") + "\n", []string{"a", "b"}, []int{2, 4}, nil, nil},
		{"pretty document", "\n{\n  \"id\": \"p\",\n  \"kind\": \"speech\",\n  \"speech\": {\"model\": \"m\",\n \"input\": {\"text\": \"t\", \"voice\": \"v\"}}\n}\n",
			[]string{"p"}, []int{2}, nil, nil},
		{"byte order mark", "\xef\xbb\xbf" + spec("a"), []string{"a"}, []int{1}, nil, nil},
		{"generated id", noID, []string{"video-1"}, []int{1}, nil, nil},
		{"invalid lines", spec("a") + "\n" + strings.Replace(spec("b"), `"duration":5`, `"duration":3`, 1) + "\nnot json\n" + spec("c"),
			[]string{"a", "c"}, []int{1, 4}, []string{"2:video.parameters.duration", "3:"}, nil},
		{"repeated id", spec("a") + "\n" + spec("a"), []string{"a"}, []int{1}, []string{"2:id"}, nil},
		{"broken pretty document", "{\n  \"id\": \"p\",\n", nil, nil, []string{"1:"}, nil},
		{"empty", " \n\n", nil, nil, nil, ErrNoSpecs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			subs, invalid, err := ReadSpecs(strings.NewReader(tt.in), counterIDs(), models.Shipped())
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			var ids []string
			var lines []int
			for _, s := range subs {
				ids, lines = append(ids, s.ID), append(lines, s.Line)
				if _, err := jobspec.Decode(s.Data, s.Kind); err != nil {
					t.Errorf("submission %s does not decode: %v", s.ID, err)
				}
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.ids) || fmt.Sprint(lines) != fmt.Sprint(tt.lines) {
				t.Errorf("ids %v lines %v, want %v %v", ids, lines, tt.ids, tt.lines)
			}
			var got []string
			for _, inv := range invalid {
				path := ""
				if ps := inv.Problems(); len(ps) > 0 {
					path = ps[0].Path
				}
				got = append(got, fmt.Sprintf("%d:%s", inv.Line, path))
				if !strings.HasPrefix(inv.Error(), fmt.Sprintf("line %d", inv.Line)) {
					t.Errorf("message %q does not start with its line", inv.Error())
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.invalid) {
				t.Errorf("invalid %v, want %v", got, tt.invalid)
			}
		})
	}
}

func TestNewSubmissionWritesTheGeneratedID(t *testing.T) {
	t.Parallel()
	in := []byte(`{ "kind":"video","video":{"model":"m","input":{"prompt":"p"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`)
	sub, err := NewSubmission(in, counterIDs(), models.Shipped())
	if err != nil {
		t.Fatal(err)
	}
	if !sub.GeneratedID || sub.ID != "video-1" || !strings.HasPrefix(string(sub.Data), `{"id":"video-1", "kind"`) {
		t.Errorf("submission %+v: %s", sub, sub.Data)
	}
	// A spec with an id is published byte for byte.
	withID := []byte(spec("keep"))
	sub, err = NewSubmission(withID, counterIDs(), models.Shipped())
	if err != nil || sub.GeneratedID || string(sub.Data) != string(withID) {
		t.Errorf("submission %+v, %v", sub, err)
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 0, 5, 0, time.FixedZone("x", 3600))
	id, err := NewID("compute", at, strings.NewReader("\x01\x02\x03\x04\x05\x06\x07\x08"))
	if err != nil {
		t.Fatal(err)
	}
	if id != "compute-20261122T090005Z-0102030405060708" || !jobspec.ValidID(id) {
		t.Errorf("id %q", id)
	}
	if _, err := NewID("video", at, strings.NewReader("short")); err == nil {
		t.Error("no error from a short random source")
	}
	if !regexp.MustCompile(`^[a-z]+-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{16}$`).MatchString(id) {
		t.Errorf("id %q has not the documented shape", id)
	}
}
