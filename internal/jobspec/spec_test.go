package jobspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

func TestKinds(t *testing.T) {
	t.Parallel()
	if got := Kinds(); len(got) != 5 || got[0] != KindVideo || got[1] != KindSpeech || got[2] != KindCompute || got[3] != KindContainer || got[4] != KindPipeline {
		t.Fatalf("Kinds() = %v", got)
	}
	tests := []struct {
		in      string
		want    Kind
		wantErr bool
	}{
		{"video", KindVideo, false},
		{"speech", KindSpeech, false},
		{"compute", KindCompute, false},
		{"Video", "", true},
		{"", "", true},
		{"audio", "", true},
	}
	for _, tt := range tests {
		got, err := ParseKind(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseKind(%q) = %q, %v", tt.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrUnknownKind) {
			t.Errorf("ParseKind(%q) error %v is not ErrUnknownKind", tt.in, err)
		}
	}
}

func TestKindFromSubject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		subject string
		want    Kind
		wantErr bool
	}{
		{"sluice.jobs.video", KindVideo, false},
		{"sluice.jobs.speech", KindSpeech, false},
		{"sluice.jobs.compute", KindCompute, false},
		{"sluice.jobs.audio", "", true},
		{"sluice.jobs.video.extra", "", true},
		{"sluice.events.video", "", true},
		{"video", "", true},
		{"", "", true},
	}
	for _, tt := range tests {
		got, err := KindFromSubject(tt.subject)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("KindFromSubject(%q) = %q, %v", tt.subject, got, err)
		}
		if err != nil && !errors.Is(err, ErrUnknownKind) {
			t.Errorf("KindFromSubject(%q) error %v is not ErrUnknownKind", tt.subject, err)
		}
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want bool
	}{
		{"a", true},
		{"clip-0001", true},
		{"A_b-9", true},
		{"0", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"-a", false},
		{"_a", false},
		{"a.b", false},
		{"a b", false},
		{"a/b", false},
		{"é", false},
		{"a\n", false},
	}
	for _, tt := range tests {
		if got := ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v", tt.id, got)
		}
	}
}

func TestParseS3URL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in              string
		bucket, key     string
		wantErrFragment string
	}{
		{in: "s3://media/a.png", bucket: "media", key: "a.png"},
		{in: "s3://my.bucket-1/key/with/slashes", bucket: "my.bucket-1", key: "key/with/slashes"},
		{in: "s3://abc/a?b#c d", bucket: "abc", key: "a?b#c d"},
		{in: "s3://abc//x", bucket: "abc", key: "/x"},
		{in: "s3://" + strings.Repeat("b", 63) + "/k", bucket: strings.Repeat("b", 63), key: "k"},
		{in: "https://media/a.png", wantErrFragment: "must start with s3://"},
		{in: "S3://media/a.png", wantErrFragment: "must start with s3://"},
		{in: "s3://media", wantErrFragment: "key must not be empty"},
		{in: "s3://media/", wantErrFragment: "key must not be empty"},
		{in: "s3:///key", wantErrFragment: "3 to 63"},
		{in: "s3://ab/key", wantErrFragment: "3 to 63"},
		{in: "s3://" + strings.Repeat("b", 64) + "/k", wantErrFragment: "3 to 63"},
		{in: "s3://Media/key", wantErrFragment: "lowercase"},
		{in: "s3://me_dia/key", wantErrFragment: "lowercase"},
		{in: "s3://-media/key", wantErrFragment: "start and end"},
		{in: "s3://media./key", wantErrFragment: "start and end"},
		{in: "s3://me..dia/key", wantErrFragment: "adjacent dots"},
		{in: "s3://10.0.0.1/key", wantErrFragment: "IP address"},
		{in: "s3://media/" + strings.Repeat("k", 1025), wantErrFragment: "at most 1024 bytes"},
		{in: "s3://media/a\x00b", wantErrFragment: "control characters"},
	}
	for _, tt := range tests {
		bucket, key, err := ParseS3URL(tt.in)
		if tt.wantErrFragment != "" {
			if err == nil || !errors.Is(err, ErrInvalidS3URL) || !strings.Contains(err.Error(), tt.wantErrFragment) {
				t.Errorf("ParseS3URL(%q) err = %v, want ...%s", tt.in, err, tt.wantErrFragment)
			}
			continue
		}
		if err != nil || bucket != tt.bucket || key != tt.key {
			t.Errorf("ParseS3URL(%q) = %q, %q, %v", tt.in, bucket, key, err)
		}
	}
}

func TestParseInteger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"5", 5, true},
		{"-5", -5, true},
		{"0", 0, true},
		{"-0", 0, true},
		{"5.0", 5, true},
		{"5.000", 5, true},
		{"50e-1", 5, true},
		{"0.5e1", 5, true},
		{"1E1", 10, true},
		{"1e+1", 10, true},
		{"0e999999999999999999999", 0, true},
		{"0.0e-99999999999", 0, true},
		{"9007199254740992", 1 << 53, true},
		{"9007199254740993", 0, false},
		{"1e16", 0, false},
		{"5.5", 0, false},
		{"5.0000000000000000001", 0, false},
		{"1e-1", 0, false},
		{"1e999999999", 0, false},
		{"1e999999999999999999999", 0, false},
		{"-1e-999999999999999999999", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseInteger(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseInteger(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestDecodeBestEffort checks the spec Decode hands back with an error: the
// id, kind and labels when they are valid themselves, nothing that broke a
// rule, and nil only for bytes that are not one JSON object.
func TestDecodeBestEffort(t *testing.T) {
	t.Parallel()
	base := string(readExample(t, "text-to-video"))
	tests := []struct {
		name       string
		doc        string
		kind       Kind
		nilSpec    bool
		wantID     string
		wantKind   Kind
		wantLabels bool
	}{
		{name: "section broken", doc: mutate(base, set("video.parameters.duration", 99)), kind: KindVideo,
			wantID: "clip-0001", wantKind: KindVideo, wantLabels: true},
		{name: "unknown field", doc: mutate(base, set("extra", 1)),
			wantID: "clip-0001", wantKind: KindVideo, wantLabels: true},
		{name: "kind mismatch keeps the spec's kind", doc: base, kind: KindSpeech,
			wantID: "clip-0001", wantKind: KindVideo, wantLabels: true},
		{name: "invalid id dropped", doc: mutate(base, set("id", "bad id")),
			wantKind: KindVideo, wantLabels: true},
		{name: "id of wrong type dropped", doc: mutate(base, set("id", 7)),
			wantKind: KindVideo, wantLabels: true},
		{name: "unknown kind dropped", doc: mutate(base, set("kind", "audio")),
			wantID: "clip-0001", wantLabels: true},
		{name: "bad labels dropped", doc: mutate(base, set("labels", map[string]any{"a": "b", "c": 1})),
			wantID: "clip-0001", wantKind: KindVideo},
		{name: "too many labels dropped", doc: mutate(base, set("labels", labelsOf(40, "k", "v"))),
			wantID: "clip-0001", wantKind: KindVideo},
		{name: "not JSON", doc: `{"id":"clip-0001"`, nilSpec: true},
		{name: "a string", doc: `"clip-0001"`, nilSpec: true},
		{name: "null", doc: `null`, nilSpec: true},
		{name: "empty", doc: ``, nilSpec: true},
		{name: "empty object", doc: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec, err := Decode([]byte(tt.doc), tt.kind)
			if err == nil {
				t.Fatal("Decode accepted an invalid spec")
			}
			if tt.nilSpec {
				if spec != nil {
					t.Errorf("spec = %+v, want nil", spec)
				}
				return
			}
			if spec == nil {
				t.Fatal("spec is nil")
			}
			if spec.ID != tt.wantID || spec.Kind != tt.wantKind || (spec.Labels != nil) != tt.wantLabels {
				t.Errorf("id %q kind %q labels %v", spec.ID, spec.Kind, spec.Labels)
			}
		})
	}
}

// TestValidateBuiltSpec covers Validate on specs built in Go, the way the
// enqueue CLI builds them from flags.
func TestValidateBuiltSpec(t *testing.T) {
	t.Parallel()
	f := false
	valid := func() *Spec {
		return &Spec{
			Kind: KindVideo,
			Video: &Video{
				Model:      "m",
				Input:      VideoInput{Prompt: "p"},
				Parameters: VideoParameters{Resolution: "768P", Duration: 5, Ratio: "1:1", Watermark: &f},
			},
		}
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	tests := []struct {
		name   string
		change func(*Spec)
		path   string
		rule   string
	}{
		{"version 2", func(s *Spec) { s.Version = 2 }, "version", "must be 1"},
		{"bad id", func(s *Spec) { s.ID = "a b" }, "id", "must match"},
		{"no kind", func(s *Spec) { s.Kind = "" }, "kind", "required"},
		{"empty prefix segment", func(s *Spec) { s.Output = &Output{Prefix: "a//b"} }, "output.prefix", "empty segment"},
		{"duration 0", func(s *Spec) { s.Video.Parameters.Duration = 0 }, "video.parameters.duration", "required"},
		{"duration negative", func(s *Spec) { s.Video.Parameters.Duration = -5 }, "video.parameters.duration", "[4, 15]"},
		{"speech section too", func(s *Spec) { s.Speech = &Speech{} }, "speech", "must be absent"},
		{"speech spec without speech", func(s *Spec) { s.Kind = KindSpeech; s.Video = nil }, "speech", "required when kind is speech"},
		{"compute nodes negative", func(s *Spec) {
			s.Kind, s.Video = KindCompute, nil
			s.Compute = &Compute{Template: Template{Type: "T", Name: "N"},
				Job: ComputeJob{Queue: "q", Nodes: -1, PPN: 1, WallTime: "01:00:00", Script: "/s"}}
		}, "compute.job.nodes", "positive"},
		{"compute gpus negative", func(s *Spec) {
			s.Kind, s.Video = KindCompute, nil
			n := -2
			s.Compute = &Compute{Template: Template{Type: "T", Name: "N"},
				Job: ComputeJob{Queue: "q", Nodes: 1, PPN: 1, WallTime: "01:00:00", Script: "/s", GPUs: &n}}
		}, "compute.job.gpus", "non-negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := valid()
			tt.change(s)
			err := s.Validate()
			var se *Error
			if !errors.As(err, &se) || len(se.Problems) != 1 || se.Problems[0].Path != tt.path || !strings.Contains(se.Problems[0].Rule, tt.rule) {
				t.Errorf("want exactly %s: ...%s..., got %v", tt.path, tt.rule, err)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	err := &Error{Problems: []Problem{{"", "not valid UTF-8"}, {"video.model", "required"}}}
	if got, want := err.Error(), "not valid UTF-8; video.model: required"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalidSpec) {
		t.Error("errors.Is(err, ErrInvalidSpec) = false")
	}
}

func TestComputeRequestDefaults(t *testing.T) {
	t.Parallel()
	c := &Compute{
		Template: Template{Type: "T", Name: "N"},
		Job:      ComputeJob{Queue: "q", Nodes: 1, PPN: 4, WallTime: "00:10:00", Script: "/s.sh"},
	}
	assertJSON(t, c.Request(ComputeTarget{JobID: "job-1", SchedulerID: "7", ClusterID: "c"}), `{
		"strJobManagerID":"7",
		"mapAppJobInfo":{"GAP_JOB_NAME":"job-1","GAP_QUEUE":"q","GAP_NNODE":"1","GAP_PPN":"4",
			"GAP_WALL_TIME":"00:10:00","GAP_SCHED_FILE":"/s.sh","GAP_NGPU":"","GAP_NDCU":"",
			"GAP_JOB_MEM":"","GAP_NODE_TYPE":"","GAP_MULTI_SUB":"","GAP_CLUSTER_ID":"c",
			"GAP_GUI":0,"advance":false}}`)

	// Extra overrides friendly names verbatim.
	c.Job.Extra = map[string]string{apiclient.KeyQueue: "other", apiclient.KeyGUI: "1"}
	info := c.Request(ComputeTarget{}).MapAppJobInfo
	if info[apiclient.KeyQueue] != "other" || info[apiclient.KeyGUI] != "1" {
		t.Errorf("extra did not override: %v", info)
	}
}
