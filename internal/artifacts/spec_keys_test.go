package artifacts_test

import (
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

// FuzzSpecKeys checks the key promise across the packages that feed a
// key: for every spec jobspec accepts, whatever its id, output.prefix or
// compute outputs, and whatever file name upstream reports, the key is
// <SLUICE_S3_PREFIX>/[<output.prefix>/]<kind>/<job id>/<one safe name>, so
// nothing lands outside the configured prefix or another job's directory;
// and an accepted spec never fails to get a key for a name the runner
// derives (which would fail a job after upstream was paid). The seed
// corpus is testdata/fuzz/FuzzSpecKeys.
func FuzzSpecKeys(f *testing.F) {
	f.Add([]byte(`{"kind":"video","id":"clip-1","output":{"prefix":"spring/clips"},"video":{"model":"m","input":{"prompt":"p"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`),
		uint8(0), "msg-1", "../../etc/passwd", uint64(7))
	store, err := artifacts.NewStore(artifacts.StoreConfig{Client: s3.New(s3.Options{Region: "us-east-1"}), Bucket: "b", Prefix: "sluice/base"})
	if err != nil {
		f.Fatal(err)
	}
	kinds := []jobspec.Kind{jobspec.KindVideo, jobspec.KindSpeech, jobspec.KindCompute}
	f.Fuzz(func(t *testing.T, data []byte, kindIndex uint8, msgID, upstreamName string, seq uint64) {
		kind := kinds[int(kindIndex)%len(kinds)]
		spec, err := jobspec.Decode(data, kind)
		if err != nil {
			return // fails at validate: nothing is stored
		}
		// The job id as the runner picks it (docs/job-spec.md).
		id := spec.ID
		if !jobspec.ValidID(id) {
			id = msgID
		}
		if !jobspec.ValidID(id) {
			id = fmt.Sprintf("js-%d", seq)
		}
		prefix := ""
		if spec.Output != nil {
			prefix = spec.Output.Prefix
		}
		dir := "sluice/base/" + string(kind) + "/" + id + "/"
		if prefix != "" {
			dir = "sluice/base/" + prefix + "/" + string(kind) + "/" + id + "/"
		}
		// The names the runner derives: fixed ones, the base of each
		// compute output, and one upstream reported.
		derived := []string{"result-0.mp4", "result-9.mp3", "stdout.txt", "stderr.txt"}
		if spec.Compute != nil {
			for i, p := range spec.Compute.Outputs {
				derived = append(derived, path.Base(p), fmt.Sprintf("%d-%s", i, artifacts.SanitizeFileName(path.Base(p))))
			}
		}
		for i, name := range append(derived, upstreamName) {
			key, err := store.Key(prefix, string(kind), id, name)
			if err != nil {
				if i < len(derived) {
					t.Fatalf("accepted spec (output.prefix %q, id %q) gets no key for %q: %v", prefix, id, name, err)
				}
				continue
			}
			file, ok := strings.CutPrefix(key, dir)
			if !ok || file == "" || strings.Contains(file, "/") || file == "." || file == ".." {
				t.Fatalf("key %q is not a file directly under %q", key, dir)
			}
		}
	})
}
