package s3dev_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/s3dev"
)

// rawRequest sends method path to the store over a bare TCP connection and
// returns the status line and header lines exactly as they came (Go's HTTP
// client would canonicalize the header names).
func rawRequest(t *testing.T, endpoint, method, path string) []string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, path, u.Host)
	r := bufio.NewReader(c)
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read response head: %v (so far %q)", err, lines)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return lines
		}
		lines = append(lines, line)
	}
}

func TestMetadataKeysAreLowerCaseOnTheWire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("m/clip.mp4"), Body: bytes.NewReader([]byte("bytes")),
		ContentType: aws.String("video/mp4"), Metadata: map[string]string{"sha256": "abc123", "Source-Name": "x"},
	})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		lines := rawRequest(t, b.srv.Endpoint(), method, "/"+bucket+"/m/clip.mp4")
		if !strings.Contains(lines[0], " 200 ") {
			t.Fatalf("%s: %q", method, lines)
		}
		var got []string
		for _, l := range lines {
			if strings.HasPrefix(strings.ToLower(l), "x-amz-meta-") {
				got = append(got, l)
			}
		}
		want := []string{"x-amz-meta-sha256: abc123", "x-amz-meta-source-name: x"}
		if strings.Join(got, "|") != strings.Join(want, "|") && strings.Join(got, "|") != want[1]+"|"+want[0] {
			t.Errorf("%s: metadata header lines %q, want %q", method, got, want)
		}
		if !contains(lines, "Content-Type: video/mp4") {
			t.Errorf("%s: no Content-Type: video/mp4 in %q", method, lines)
		}
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// A file written into a bucket's directory by hand is an object: listed,
// served with a Content-Type from its extension, replaceable by hand and
// over S3.
func TestFilesPlacedByHandAreObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	place := func(key, body string) {
		t.Helper()
		p := b.srv.ObjectPath(bucket, key)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	place("inputs/frame.png", "not really a png")
	place("inputs/deep/notes.txt", "hello")

	list, err := b.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListObjectsV2: %v", err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, aws.ToString(o.Key)+fmt.Sprintf("=%d", aws.ToInt64(o.Size)))
	}
	if strings.Join(keys, ",") != "inputs/deep/notes.txt=5,inputs/frame.png=16" {
		t.Errorf("listed %v", keys)
	}
	got, out := b.get(t, "inputs/frame.png")
	if string(got) != "not really a png" || aws.ToString(out.ContentType) != "image/png" || aws.ToString(out.ETag) != `"`+md5hex("not really a png")+`"` {
		t.Errorf("GET = %q type %q etag %s", got, aws.ToString(out.ContentType), aws.ToString(out.ETag))
	}
	head, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("inputs/deep/notes.txt")})
	if err != nil || aws.ToInt64(head.ContentLength) != 5 || !strings.HasPrefix(aws.ToString(head.ContentType), "text/plain") {
		t.Errorf("HEAD = %+v, %v", head, err)
	}

	// Replaced by hand: the new bytes, and no user metadata of the old ones.
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("inputs/frame.png"), Body: bytes.NewReader([]byte("v2")),
		Metadata: map[string]string{"sha256": "of-v2"},
	})
	if err != nil {
		t.Fatalf("PutObject over a placed file: %v", err)
	}
	if _, out := b.get(t, "inputs/frame.png"); out.Metadata["sha256"] != "of-v2" {
		t.Errorf("metadata after PUT = %v", out.Metadata)
	}
	place("inputs/frame.png", "version three")
	got, out = b.get(t, "inputs/frame.png")
	if string(got) != "version three" || len(out.Metadata) != 0 || aws.ToString(out.ETag) != `"`+md5hex("version three")+`"` {
		t.Errorf("after replacing by hand: %q metadata %v etag %s", got, out.Metadata, aws.ToString(out.ETag))
	}

	// A presigned GET (what the worker hands upstream for s3:// inputs).
	req, err := s3.NewPresignClient(b.client).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("inputs/deep/notes.txt")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(req.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("presigned GET of a placed file: %d", resp.StatusCode)
	}
}

// The AWS CLI shows the metadata keys as they come on the wire, so the
// documented `--query Metadata.sha256` works; it also uploads and lists
// with the documented endpoint and credentials.
func TestAWSCLI(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("aws"); err != nil {
		t.Skip("the AWS CLI (aws) is not on PATH; .ci/run installs Debian's awscli")
	}
	b := setup(t)
	home := t.TempDir()
	cfg := filepath.Join(home, "config")
	if err := os.WriteFile(cfg, []byte("[default]\nregion = "+s3dev.Region+"\ns3 =\n  addressing_style = path\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("aws", append([]string{"--endpoint-url", b.srv.Endpoint(), "--output", "text"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "AWS_CONFIG_FILE="+cfg, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"),
			"AWS_ACCESS_KEY_ID="+s3dev.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+s3dev.SecretAccessKey, "AWS_PAGER=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	_, err := b.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("out/result-0.mp4"), Body: bytes.NewReader([]byte("video")),
		ContentType: aws.String("video/mp4"), Metadata: map[string]string{"sha256": "5ha"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cli("s3api", "head-object", "--bucket", bucket, "--key", "out/result-0.mp4", "--query", "Metadata.sha256"); got != "5ha" {
		t.Errorf("head-object --query Metadata.sha256 = %q, want 5ha", got)
	}
	if got := cli("s3api", "head-object", "--bucket", bucket, "--key", "out/result-0.mp4", "--query", "ContentType"); got != "video/mp4" {
		t.Errorf("head-object --query ContentType = %q", got)
	}
	local := filepath.Join(home, "frame.png")
	if err := os.WriteFile(local, []byte("png bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli("s3", "cp", local, "s3://"+bucket+"/inputs/frame.png")
	if got, out := b.get(t, "inputs/frame.png"); string(got) != "png bytes" || aws.ToString(out.ContentType) != "image/png" {
		t.Errorf("uploaded with aws s3 cp: %q %q", got, aws.ToString(out.ContentType))
	}
	if got := cli("s3", "ls", "s3://"+bucket+"/inputs/"); !strings.Contains(got, "frame.png") {
		t.Errorf("aws s3 ls = %q", got)
	}
}

func md5hex(s string) string { return fmt.Sprintf("%x", md5.Sum([]byte(s))) }

// TestCutPutKeepsThePreviousObject sends a PUT whose body ends before the
// length it announced: the object written before must stay whole, as on
// a real S3 store (the file-system backend truncates before it reads).
func TestCutPutKeepsThePreviousObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const key = "cut/result.mp4"
	old := bytes.Repeat([]byte("complete "), 1000)
	if _, err := b.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(old),
		Metadata: map[string]string{"sha256": "old"},
	}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	u, err := url.Parse(b.srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "PUT /%s/%s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\nX-Amz-Meta-Sha256: new\r\n\r\nshort body", bucket, key, u.Host)
	_ = c.(*net.TCPConn).CloseWrite()
	answer, _ := io.ReadAll(c)
	_ = c.Close()
	if bytes.HasPrefix(answer, []byte("HTTP/1.1 2")) {
		t.Errorf("a body shorter than its Content-Length was accepted: %.60q", answer)
	}
	// Close waits for the request being handled, so the PUT is over.
	if err := b.srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got, err := os.ReadFile(b.srv.ObjectPath(bucket, key))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, old) {
		t.Fatalf("after a cut PUT the object holds %d bytes %.20q, want the previous %d bytes", len(got), got, len(old))
	}
}
