package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

// localBundle runs enqueue against an embedded NATS and the project's S3
// store, with local media files in dir.
type localBundle struct {
	nats *testenv.NATS
	s3   *testenv.S3Env
	dir  string
	vars map[string]string
}

func setupLocal(t *testing.T) *localBundle {
	t.Helper()
	b := &localBundle{nats: testenv.StartNATS(t), s3: testenv.StartS3(t), dir: t.TempDir()}
	b.vars = map[string]string{
		"SLUICE_NATS_URL": b.nats.URL, "SLUICE_S3_BUCKET": b.s3.Bucket, "SLUICE_S3_ENDPOINT": b.s3.Endpoint,
		"SLUICE_S3_PATH_STYLE": "true", "AWS_ACCESS_KEY_ID": s3dev.AccessKeyID, "AWS_SECRET_ACCESS_KEY": s3dev.SecretAccessKey,
	}
	return b
}

// file writes a fixture under name and returns its path.
func (b *localBundle) file(t *testing.T, fixture, name string) string {
	t.Helper()
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, testmedia.Fixture(t, fixture), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs enqueue video with args after its required flags.
func (b *localBundle) run(t *testing.T, terminal bool, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return b.enqueue(t, terminal, append([]string{"video", "--model", "m", "--prompt", "p", "--resolution", "768P", "--duration", "5"}, args...)...)
}

// enqueue runs enqueue with args.
func (b *localBundle) enqueue(t *testing.T, terminal bool, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getenv:     func(k string) string { return b.vars[k] },
		IsTerminal: func(w io.Writer) bool { return terminal && w == &errOut },
		Now:        time.Now, Rand: strings.NewReader(strings.Repeat("r", 64)),
	}
	code = Run(testenv.Context(t, 60*time.Second), args, env)
	return code, out.String(), errOut.String()
}

// published returns the specs in SLUICE_JOBS.
func (b *localBundle) published(t *testing.T) []jobspec.Spec {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	s, err := b.nats.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []jobspec.Spec
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var spec jobspec.Spec
		if err := json.Unmarshal(m.Data, &spec); err != nil {
			t.Fatal(err)
		}
		out = append(out, spec)
	}
	return out
}

func (b *localBundle) objects(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	list, err := b.s3.Client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(b.s3.Bucket)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Contents {
		head, err := b.s3.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.s3.Bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		out[aws.ToString(o.Key)] = head.Metadata["sha256"]
	}
	return out
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestVideoLocalFiles: local media files are checked, uploaded by content
// under the inputs prefix with their sha256, and published as s3:// URLs;
// a second run uploads nothing; the upload shows progress on a terminal.
func TestVideoLocalFiles(t *testing.T) {
	t.Parallel()
	b := setupLocal(t)
	// The name says .dat: the bytes decide that it is a PNG.
	img := b.file(t, "image-384x256.png", "boat.dat")
	clip := b.file(t, "video-moov-at-end.mp4", "clip.mp4")
	pngKey := "sluice/inputs/sha256/" + sum(testmedia.Fixture(t, "image-384x256.png")) + ".png"
	mp4Key := "sluice/inputs/sha256/" + sum(testmedia.Fixture(t, "video-moov-at-end.mp4")) + ".mp4"

	// --dry-run checks the files and shows their URLs; nothing is sent.
	code, stdout, stderr := b.run(t, false, "--ref-image", img, "--ref-video", clip, "--id", "local-0", "--dry-run")
	if code != ExitOK || !strings.Contains(stdout, "s3://"+b.s3.Bucket+"/"+pngKey) || !strings.Contains(stdout, "s3://"+b.s3.Bucket+"/"+mp4Key) {
		t.Errorf("dry run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if objs := b.objects(t); len(objs) != 0 {
		t.Errorf("dry run uploaded %v", objs)
	}

	code, stdout, stderr = b.run(t, true, "--ref-image", img, "--ref-video", clip, "--ref-image", "https://example.test/a.png", "--id", "local-1")
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "uploading boat.dat") || !strings.Contains(stderr, "uploading clip.mp4") {
		t.Errorf("no upload progress on the terminal: %q", stderr)
	}
	objs := b.objects(t)
	if len(objs) != 2 || objs[pngKey] == "" || objs[mp4Key] == "" ||
		!strings.HasSuffix(pngKey, objs[pngKey]+".png") || !strings.HasSuffix(mp4Key, objs[mp4Key]+".mp4") {
		t.Errorf("objects = %v, want %s and %s with their sha256", objs, pngKey, mp4Key)
	}
	specs := b.published(t)
	if len(specs) != 1 {
		t.Fatalf("published %d specs", len(specs))
	}
	media := specs[0].Video.Input.Media
	// The flags' roles in the contract's order: images, then videos.
	want := []string{"s3://" + b.s3.Bucket + "/" + pngKey, "https://example.test/a.png", "s3://" + b.s3.Bucket + "/" + mp4Key}
	for i, m := range media {
		if i >= len(want) || m.URL != want[i] {
			t.Errorf("media[%d] = %s, want %s", i, m.URL, want[min(i, len(want)-1)])
		}
	}

	// The same files again: nothing is uploaded.
	code, stdout, stderr = b.run(t, false, "--ref-image", img, "--ref-video", clip, "--id", "local-2")
	if code != ExitOK || strings.Count(stderr, "already in S3, not uploaded again") != 2 {
		t.Errorf("second run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if objs := b.objects(t); len(objs) != 2 {
		t.Errorf("second run left %d objects", len(objs))
	}
}

// TestVideoLocalFileRefused: a file that breaks a limit, a missing file,
// a spec that cannot be published and a missing bucket are immediate
// errors naming the flag: nothing is uploaded, nothing published.
func TestVideoLocalFileRefused(t *testing.T) {
	t.Parallel()
	b := setupLocal(t)
	small := b.file(t, "image-200x180.jpg", "small.jpg")
	gif := b.file(t, "image-disguised.png", "boat.png")
	good := b.file(t, "image-384x256.jpg", "good.jpg")
	long := b.file(t, "video-h264-13.1s.mp4", "long.mp4")
	two := b.file(t, "video-h264-aac-2s.mp4", "two.mp4")
	tests := []struct {
		name string
		args []string
		vars map[string]string
		msg  string
	}{
		{"too small", []string{"--first-frame", small}, nil, "--first-frame " + small + ": image is 200x180 px, want width and height in [256, 5760]"},
		{"GIF named png", []string{"--first-frame", good, "--last-frame", gif}, nil, "--last-frame " + gif + ": content is GIF, want image"},
		{"missing", []string{"--first-frame", filepath.Join(b.dir, "none.png")}, nil, "none.png: no such file or directory"},
		{"totals", []string{"--ref-video", long, "--ref-video", two}, nil, "the 2 video clips total 15.1 s, want at most 15 s"},
		{"invalid spec", []string{"--first-frame", good, "--ref-image", good}, nil, "role reference_image cannot be combined with first_frame"},
		{"no bucket", []string{"--first-frame", good}, map[string]string{"SLUICE_S3_BUCKET": ""}, "set SLUICE_S3_BUCKET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bb := *b
			bb.vars = map[string]string{}
			for k, v := range b.vars {
				bb.vars[k] = v
			}
			for k, v := range tt.vars {
				bb.vars[k] = v
			}
			code, _, stderr := bb.run(t, false, tt.args...)
			if code != ExitUsage || !strings.Contains(stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tt.msg)
			}
		})
	}
	if objs := b.objects(t); len(objs) != 0 {
		t.Errorf("refused runs uploaded %v", objs)
	}
	if specs := b.published(t); len(specs) != 0 {
		t.Errorf("refused runs published %d specs", len(specs))
	}
}
