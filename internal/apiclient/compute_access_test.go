package apiclient_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

const (
	computeAccessKey = "ak-3f9c2e"
	computeSecretKey = "sk-Very-Secret-77"
)

// modes runs f once against the simulator in platform mode and once in
// Letter mode.
func modes(t *testing.T, f func(t *testing.T, letter bool)) {
	for _, letter := range []bool{false, true} {
		name := "platform"
		if letter {
			name = "letter"
		}
		t.Run(name, func(t *testing.T) { t.Parallel(); f(t, letter) })
	}
}

// pathRecorder records the path of every request that reaches the
// simulator.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
}

func (p *pathRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.paths = append(p.paths, r.URL.Path)
		p.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func TestComputeServiceSegmentAppearsOnce(t *testing.T) {
	modes(t, func(t *testing.T, letter bool) {
		rec := &pathRecorder{}
		b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.Letter = letter }, wrap: rec.wrap})
		s := b.session(t)
		ctx := context.Background()
		if err := s.Upload(ctx, "/data", "a.txt", false, openString("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Clusters(ctx); err != nil {
			t.Fatal(err)
		}
		body, err := s.Download(ctx, "/data/a.txt")
		if err != nil {
			t.Fatal(err)
		}
		_ = body.Close()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, p := range rec.paths {
			for _, seg := range []string{"/efile", "/hpc", "/ai"} {
				if strings.Count(p, seg+"/") > 1 {
					t.Errorf("path %s carries %s twice", p, seg)
				}
			}
		}
		if !strings.Contains(strings.Join(rec.paths, " "), "/efile/openapi/v2/file/upload") {
			t.Errorf("no upload seen: %v", rec.paths)
		}
	})
}

func openString(s string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(s)), nil }
}

func TestComputeUploadCoverUncover(t *testing.T) {
	modes(t, func(t *testing.T, letter bool) {
		b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.Letter = letter }})
		s := b.session(t)
		ctx := context.Background()
		if err := s.Upload(ctx, "/in", "f.txt", false, openString("first")); err != nil {
			t.Fatal(err)
		}
		// uncover keeps the file: the platform refuses the second upload.
		if err := s.Upload(ctx, "/in", "f.txt", false, openString("second")); err == nil {
			t.Error("an uncover upload replaced an existing file")
		}
		// A redelivered upload sends cover and overwrites.
		if err := s.Upload(ctx, "/in", "f.txt", true, openString("third")); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.sim.File("/in/f.txt"); string(got) != "third" {
			t.Errorf("file = %q, want third", got)
		}
	})
}

func TestComputeAKSKAndPasswordLogins(t *testing.T) {
	modes(t, func(t *testing.T, letter bool) {
		b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.Letter = letter }})
		if _, err := b.client.Cluster(context.Background(), ""); err != nil {
			t.Fatalf("password login: %v", err)
		}
	})
	b := setupCompute(t, computeOpts{
		sim: func(c *apisim.ComputeConfig) { c.AccessKey, c.SecretKey = computeAccessKey, computeSecretKey },
		client: func(c *apiclient.ComputeConfig) {
			c.Password, c.OrgID, c.AccessKey, c.SecretKey = "", "", computeAccessKey, computeSecretKey
		},
	})
	s := b.session(t)
	if _, err := s.Clusters(context.Background()); err != nil {
		t.Fatalf("AK/SK login: %v", err)
	}
	if n := b.count("requests:" + apisim.EndpointComputeAKSK + ":200"); n != 1 {
		t.Errorf("AK/SK logins = %d, want 1", n)
	}
	if n := b.count("requests:" + apisim.EndpointComputeTokens + ":200"); n != 0 {
		t.Errorf("password logins = %d, want 0", n)
	}
}

func TestComputeWrongSecretKeyNamesTheVariableAndLeaksNothing(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	const wrong = "sk-Wrong-Secret-13"
	b := setupCompute(t, computeOpts{
		sim: func(c *apisim.ComputeConfig) { c.AccessKey, c.SecretKey = computeAccessKey, computeSecretKey },
		client: func(c *apiclient.ComputeConfig) {
			c.AccessKey, c.SecretKey, c.Logger = computeAccessKey, wrong, &log
		},
	})
	_, err := b.client.Cluster(context.Background(), "")
	if err == nil || !errors.Is(err, apiclient.ErrUnauthorized) || !strings.Contains(err.Error(), "SLUICE_COMPUTE_SECRET_KEY") {
		t.Fatalf("error = %v, want ErrUnauthorized naming SLUICE_COMPUTE_SECRET_KEY", err)
	}
	sig := apiclient.SignAKSK(computeAccessKey, wrong, computeUser, strconv.FormatInt(b.clock.Now().Unix(), 10))
	computeNoSecret(t, err, wrong, computeSecretKey, sig)
	for _, s := range []string{wrong, sig} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("log leaks %q: %s", s, logs.String())
		}
	}
}

func TestComputeSignatureMatchesThePublishedExample(t *testing.T) {
	// The message the official page spells out, signed the documented way.
	got := apiclient.SignAKSK("85f96a42b13f4d2c8b760d2775bbcca8", "k", "bob", "1764597591")
	want := hmacHex("k", `{"accessKey":"85f96a42b13f4d2c8b760d2775bbcca8","timestamp":"1764597591","user":"bob"}`)
	if got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
}

func TestComputeRegionsSkipSuspendedAndPlatform(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	b := setupCompute(t, computeOpts{client: func(c *apiclient.ComputeConfig) { c.Region, c.Logger = "cluster-b", &log }})
	ctx := context.Background()
	toks, err := b.client.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range toks {
		ids = append(ids, e.ClusterID)
	}
	if strings.Join(ids, ",") != "1001,1002,1004" {
		t.Errorf("usable regions = %v", ids)
	}
	if s := b.session(t); s.ClusterID() != "1002" {
		t.Errorf("SLUICE_COMPUTE_REGION=cluster-b opened %s", s.ClusterID())
	}
	for name, want := range map[string]string{"cluster-c": "suspended", "1003": "suspended", "0": "platform", "ac": "platform", "nowhere": "names no region of the token answer; usable regions: cluster-a (1001), cluster-b (1002), cluster-d (1004)"} {
		_, err := b.client.Cluster(ctx, name)
		if !errors.Is(err, apiclient.ErrClusterNotFound) || !strings.Contains(err.Error(), want) {
			t.Errorf("Cluster(%q) = %v, want ErrClusterNotFound saying %q", name, err, want)
		}
	}
	if _, err := b.client.Tokens(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), `"region":"cluster-c"`); n != 1 {
		t.Errorf("suspended region logged %d times: %s", n, logs.String())
	}
	// The platform's own token is never used: the center answers it 10001.
	if n := b.count("requests:" + apisim.EndpointComputeCenter + ":200"); n != 1 {
		t.Errorf("center calls = %d", n)
	}
}

func TestComputeJWTRefreshedBeforeExpiry(t *testing.T) {
	b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.TokenLifetime = time.Hour }})
	s := b.session(t)
	ctx := context.Background()
	if _, err := s.Clusters(ctx); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(58 * time.Minute)
	if _, err := s.Clusters(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.count("requests:" + apisim.EndpointComputeTokens + ":200"); n != 1 {
		t.Errorf("token calls = %d, want 1: the token is renewed, not replaced by a login", n)
	}
	if n := b.count("requests:" + apisim.EndpointComputeTokensNext + ":200"); n != 1 {
		t.Errorf("renewals = %d, want 1 ahead of expiry", n)
	}
	if n := b.count("requests:" + apisim.EndpointComputeCluster + ":401"); n != 0 {
		t.Errorf("a call met an expired token (%d answers 401)", n)
	}
}

// sizedSource is an upload source that reports its length.
type sizedSource struct {
	io.Reader
	size int64
}

func (s sizedSource) Close() error { return nil }
func (s sizedSource) Size() int64  { return s.size }

func TestComputeChunkedUploadArrivesIntactThroughFaults(t *testing.T) {
	const size = 20 << 20
	for _, sized := range []bool{true, false} {
		t.Run("sized="+strconv.FormatBool(sized), func(t *testing.T) {
			t.Parallel()
			b := setupCompute(t, computeOpts{client: func(c *apiclient.ComputeConfig) { c.ChunkSize = 8 << 20 }})
			s := b.session(t)
			opens := 0
			open := func() (io.ReadCloser, error) {
				opens++
				r := apisim.ResultBytes("chunked", 0, size)
				if sized {
					return sizedSource{Reader: r, size: size}, nil
				}
				return io.NopCloser(r), nil
			}
			b.sim.Faults().Set(apisim.EndpointComputeBurst, apisim.Fault{Error500AfterRate: 1, Times: 1})
			b.sim.Faults().Set(apisim.EndpointComputeMerge, apisim.Fault{Error500AfterRate: 0, Error5xxRate: 1, Times: 1})
			if err := s.Upload(context.Background(), "/big", "in.bin", true, open); err != nil {
				t.Fatalf("Upload: %v", err)
			}
			got, ok := b.sim.File("/big/in.bin")
			want := sha256.New()
			_, _ = io.Copy(want, apisim.ResultBytes("chunked", 0, size))
			if sum := sha256.Sum256(got); !ok || !bytes.Equal(sum[:], want.Sum(nil)) {
				t.Fatalf("file differs (%d bytes, present %v)", len(got), ok)
			}
			if n := b.count("requests:" + apisim.EndpointComputeBurst + ":200"); n < 3 {
				t.Errorf("chunks acknowledged = %d, want at least 3", n)
			}
			if n := b.count("requests:" + apisim.EndpointComputeUpload + ":200"); n != 0 {
				t.Errorf("single-request uploads = %d, want 0", n)
			}
		})
	}
}

func TestComputeFailedMergeLeavesNoTarget(t *testing.T) {
	b := setupCompute(t, computeOpts{client: func(c *apiclient.ComputeConfig) { c.ChunkSize = 1 << 20; c.MaxAttempts = 2 }})
	s := b.session(t)
	b.sim.Faults().Set(apisim.EndpointComputeMerge, apisim.Fault{Error500AfterRate: 0, Error5xxRate: 1})
	open := func() (io.ReadCloser, error) { return io.NopCloser(apisim.ResultBytes("m", 0, 3<<20)), nil }
	if err := s.Upload(context.Background(), "/m", "x.bin", true, open); err == nil {
		t.Fatal("Upload succeeded although every merge failed")
	}
	if _, ok := b.sim.File("/m/x.bin"); ok {
		t.Error("a failed merge left the target")
	}
}

func hmacHex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// TestComputeSimulatedSuspendedRegionIsInfo: on sluice's own simulator the
// suspended region is one of its features: said once at info, not warned.
func TestComputeSimulatedSuspendedRegionIsInfo(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	b := setupCompute(t, computeOpts{client: func(c *apiclient.ComputeConfig) { c.Logger, c.Simulated = &log, true }})
	for range 2 {
		if _, err := b.client.Tokens(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	out := logs.String()
	if strings.Contains(out, `"level":"warn"`) || strings.Count(out, `"region":"cluster-c"`) != 1 ||
		!strings.Contains(out, `"level":"info"`) || !strings.Contains(out, "simulat") {
		t.Errorf("want one info line naming the simulated platform's suspended region, got: %s", out)
	}
}
