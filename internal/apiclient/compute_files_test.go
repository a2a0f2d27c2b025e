package apiclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// computeOpen returns an Upload source of s.
func computeOpen(s string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(s)), nil }
}

// countingOpen counts how often the source is opened.
func countingOpen(s string, opens *atomic.Int32) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		opens.Add(1)
		return io.NopCloser(strings.NewReader(s)), nil
	}
}

func TestComputeUploadDownload(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{})
	s := b.session(t)
	ctx := context.Background()

	if err := s.Upload(ctx, "/public/home/alice/in", "data.txt", false, computeOpen("first")); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.sim.File("/public/home/alice/in/data.txt"); !ok || string(got) != "first" {
		t.Fatalf("stored %q, %v", got, ok)
	}

	t.Run("no cover keeps an existing file", func(t *testing.T) {
		err := s.Upload(ctx, "/public/home/alice/in", "data.txt", false, computeOpen("second"))
		env, ok := errors.AsType[*apiclient.EnvelopeError](err)
		if !ok || env.Code != apisim.ComputeCodeFileExists || !errors.Is(err, apiclient.ErrFileExists) {
			t.Fatalf("err = %v, want code %s", err, apisim.ComputeCodeFileExists)
		}
	})
	t.Run("cover overwrites", func(t *testing.T) {
		if err := s.Upload(ctx, "/public/home/alice/in", "data.txt", true, computeOpen("third")); err != nil {
			t.Fatal(err)
		}
		rc, err := s.Download(ctx, "/public/home/alice/in/data.txt")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rc.Close() }()
		got, err := io.ReadAll(rc)
		if err != nil || string(got) != "third" {
			t.Fatalf("downloaded %q, %v", got, err)
		}
		if sz, ok := rc.(interface{ Size() int64 }); !ok || sz.Size() != 5 {
			t.Errorf("Size = %v", rc)
		}
	})
	t.Run("odd path is encoded", func(t *testing.T) {
		dir := "/public/home/alice/in dir/a&b=c?d"
		if err := s.Upload(ctx, dir, "x y+z.txt", true, computeOpen("odd")); err != nil {
			t.Fatal(err)
		}
		rc, err := s.Download(ctx, dir+"/x y+z.txt")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rc.Close() }()
		if got, _ := io.ReadAll(rc); string(got) != "odd" {
			t.Fatalf("downloaded %q", got)
		}
	})
	t.Run("missing file is an error, not content", func(t *testing.T) {
		_, err := s.Download(ctx, "/public/home/alice/nope.txt")
		env, ok := errors.AsType[*apiclient.EnvelopeError](err)
		if !ok || env.Code != apisim.ComputeCodeFileMissing || env.Status != http.StatusOK || !errors.Is(err, apiclient.ErrFileMissing) {
			t.Fatalf("err = %v, want an envelope error %s", err, apisim.ComputeCodeFileMissing)
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		tests := []struct {
			name, field string
			call        func() error
		}{
			{"empty dir", "dir", func() error { return s.Upload(ctx, "", "a", true, computeOpen("")) }},
			{"relative dir", "dir", func() error { return s.Upload(ctx, "rel/dir", "a", true, computeOpen("")) }},
			{"empty name", "fileName", func() error { return s.Upload(ctx, "/d", "", true, computeOpen("")) }},
			{"name with slash", "fileName", func() error { return s.Upload(ctx, "/d", "a/b", true, computeOpen("")) }},
			{"no source", "open", func() error { return s.Upload(ctx, "/d", "a", true, nil) }},
			{"empty download path", "path", func() error { _, err := s.Download(ctx, ""); return err }},
			{"relative download path", "path", func() error { _, err := s.Download(ctx, "a/b"); return err }},
		}
		for _, tt := range tests {
			err := tt.call()
			if !errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("%s: err = %v, want ErrInvalidArgument naming %s", tt.name, err, tt.field)
			}
		}
	})
}

func TestComputeUploadRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name      string
		fault     apisim.Fault
		cover     bool
		wantErr   bool
		wantOpens int32
	}{
		{"429 retried without cover", apisim.Fault{Error429Rate: 1}, false, false, 2},
		{"500 after storing retried with cover", apisim.Fault{Error500AfterRate: 1}, true, false, 2},
		{"500 after storing not retried without cover", apisim.Fault{Error500AfterRate: 1}, false, true, 1},
		{"malformed answer retried with cover", apisim.Fault{MalformedRate: 1}, true, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupCompute(t, computeOpts{})
			s := b.session(t)
			b.sim.Faults().Set(apisim.EndpointComputeUpload, tt.fault)
			b.sleep.OnWait(func(int) { b.sim.Faults().Reset() })
			var opens atomic.Int32
			err := s.Upload(ctx, "/data", "f.bin", tt.cover, countingOpen("payload", &opens))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got := opens.Load(); got != tt.wantOpens {
				t.Errorf("source opened %d times, want %d", got, tt.wantOpens)
			}
		})
	}

	t.Run("source read error is not retried", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		boom := errors.New("disk on fire")
		var opens atomic.Int32
		err := s.Upload(ctx, "/data", "broken.bin", true, func() (io.ReadCloser, error) {
			opens.Add(1)
			return io.NopCloser(io.MultiReader(strings.NewReader("part"), &computeErrReader{err: boom})), nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the source error", err)
		}
		if opens.Load() != 1 {
			t.Errorf("opened %d times, want 1", opens.Load())
		}
		if _, ok := b.sim.File("/data/broken.bin"); ok {
			t.Error("a broken upload left a file")
		}
	})
	t.Run("open error is returned", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		boom := errors.New("no such object")
		err := s.Upload(ctx, "/data", "x", true, func() (io.ReadCloser, error) { return nil, boom })
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the open error", err)
		}
	})
}

type computeErrReader struct{ err error }

func (r *computeErrReader) Read([]byte) (int, error) { return 0, r.err }

// streamProbe is an upload source that, after handing out holdAt bytes,
// waits until the simulator has stored at least needStored bytes. A client
// that buffered the whole body before sending would never get there.
type streamProbe struct {
	r          io.Reader
	read       int64
	holdAt     int64
	needStored int64
	stored     func() int64
	deadline   time.Time
	held       bool
	closed     atomic.Bool
}

func (p *streamProbe) Read(b []byte) (int, error) {
	if !p.held && p.read >= p.holdAt {
		p.held = true
		for p.stored() < p.needStored {
			if time.Now().After(p.deadline) {
				return 0, fmt.Errorf("simulator holds %d bytes after %d were read: the upload is buffered, not streamed", p.stored(), p.read)
			}
			time.Sleep(time.Millisecond)
		}
	}
	n, err := p.r.Read(b)
	p.read += int64(n)
	return n, err
}

func (p *streamProbe) Close() error {
	p.closed.Store(true)
	return nil
}

func TestComputeUploadStreamsLargeFile(t *testing.T) {
	t.Parallel()
	const size = 64 << 20
	b := setupCompute(t, computeOpts{})
	s := b.session(t)
	var opens atomic.Int32
	var probe *streamProbe
	err := s.Upload(context.Background(), "/big", "blob.bin", true, func() (io.ReadCloser, error) {
		if opens.Add(1) > 1 {
			return nil, errors.New("opened twice")
		}
		probe = &streamProbe{
			r:      apisim.ResultBytes("compute-upload-test", 0, size),
			holdAt: 48 << 20, needStored: 16 << 20,
			stored:   func() int64 { return b.count("bytes:" + apisim.EndpointComputeUpload) },
			deadline: time.Now().Add(time.Minute),
		}
		return probe, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !probe.closed.Load() {
		t.Error("the source was not closed")
	}
	want := sha256.New()
	if _, err := io.Copy(want, apisim.ResultBytes("compute-upload-test", 0, size)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(b.sim.Root(), "big", "blob.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	got := sha256.New()
	n, err := io.Copy(got, f)
	if err != nil || n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("stored %d bytes (err %v), sha256 match %v", n, err, bytes.Equal(got.Sum(nil), want.Sum(nil)))
	}
}

func TestComputeDownloadJSONContent(t *testing.T) {
	t.Parallel()
	// A platform that serves a JSON file as application/json: content that
	// is not an error envelope is the file.
	b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/file/download") {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				switch r.URL.Query().Get("path") {
				case "/ok.json":
					_, _ = io.WriteString(w, `{"code":"0","results":[1,2]}`)
				case "/plain.json":
					_, _ = io.WriteString(w, `[1,2,3]`)
				default:
					_, _ = io.WriteString(w, `{"code":"40004","msg":"no such file","data":null}`)
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	}})
	s := b.session(t)
	ctx := context.Background()
	for _, p := range []string{"/ok.json", "/plain.json"} {
		rc, err := s.Download(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		got, _ := io.ReadAll(rc)
		_ = rc.Close()
		if len(got) == 0 || got[0] != '{' && got[0] != '[' {
			t.Errorf("%s: content %q", p, got)
		}
	}
	_, err := s.Download(ctx, "/missing.json")
	if env, ok := errors.AsType[*apiclient.EnvelopeError](err); !ok || env.Code != "40004" {
		t.Fatalf("err = %v, want envelope error 40004", err)
	}
}
