package jobspec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecode checks that Decode, Validate, the request builders and the
// marshal round trip never panic, and that whatever Decode accepts
// validates, matches its arrival kind and survives json.Marshal unchanged.
// The seed corpus is testdata/fuzz/FuzzDecode (the examples and a set of
// invalid specs); `go test` runs only the seeds.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, kind string) {
		spec, err := Decode(data, Kind(kind))
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || len(se.Problems) == 0 || se.Error() == "" {
				t.Fatalf("error %T %v is not a non-empty *Error", err, err)
			}
			if spec != nil {
				if _, err := json.Marshal(spec); err != nil {
					t.Fatalf("marshal best-effort spec: %v", err)
				}
				_ = spec.Validate()
			}
			return
		}
		if spec == nil {
			t.Fatal("nil spec without error")
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("Decode accepted, Validate rejects: %v", err)
		}
		if kind != "" && spec.Kind != Kind(kind) {
			t.Fatalf("accepted kind %q for subject kind %q", spec.Kind, kind)
		}
		switch spec.Kind {
		case KindVideo:
			_ = spec.Video.Request()
		case KindSpeech:
			_ = spec.Speech.Request()
		case KindCompute:
			_ = spec.Compute.Request(ComputeTarget{JobID: "j", SchedulerID: "1", ClusterID: "c"})
		}
		out, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Decode(out, Kind(kind))
		if err != nil {
			t.Fatalf("re-decode of %s: %v", out, err)
		}
		if !reflect.DeepEqual(spec, again) {
			t.Fatalf("round trip differs:\n%#v\n%#v", spec, again)
		}
	})
}

// TestFuzzCorpusHasExamples keeps the seed corpus in step with the examples.
func TestFuzzCorpusHasExamples(t *testing.T) {
	t.Parallel()
	for _, name := range exampleNames(t) {
		seed, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzDecode", "example-"+name))
		if err != nil {
			t.Errorf("no seed for example %s: %v", name, err)
			continue
		}
		want := "[]byte(" + strconv.Quote(string(readExample(t, name))) + ")"
		if !strings.Contains(string(seed), want) {
			t.Errorf("seed example-%s differs from testdata/examples/%s.json", name, name)
		}
	}
}
