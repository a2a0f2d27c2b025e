package apisim_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/apisim"
)

func TestComputeSimAKSKLogin(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.AccessKey, c.SecretKey = "ak-1", "sk-1" })
	sign := func(key, ts string) string {
		m := hmac.New(sha256.New, []byte(key))
		m.Write([]byte(`{"accessKey":"ak-1","timestamp":"` + ts + `","user":"` + csUser + `"}`))
		return hex.EncodeToString(m.Sum(nil))
	}
	login := func(sig string) csAnswer {
		return b.do(t, http.MethodPost, "/api/user/v3/tokens", map[string]string{
			"user": csUser, "accessKey": "ak-1", "timestamp": "1764597591", "signature": sig,
		}, nil, "application/json")
	}
	if a := login(sign("sk-1", "1764597591")); a.Code != "0" {
		t.Errorf("good signature: %s", a.raw)
	}
	if a := login(sign("sk-other", "1764597591")); a.status != http.StatusOK || a.Code != apisim.ComputeCodeCheckFailed {
		t.Errorf("bad signature: %d %s", a.status, a.raw)
	}
	letter := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.Letter = true })
	if a := letter.do(t, http.MethodPost, "/api/user/v3/tokens", map[string]string{"user": csUser}, nil, "application/json"); a.status != http.StatusNotFound {
		t.Errorf("Letter mode has an AK/SK login: %d", a.status)
	}
}

func TestComputeSimPlatformTokenAndCenter(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	a := b.do(t, http.MethodPost, "/ac/openapi/v2/tokens", map[string]string{"user": csUser, "password": csPass, "orgid": csOrg}, nil, "application/json")
	raw := string(a.Data)
	if !strings.Contains(raw, `"clusterId":"1003","clusterName":"cluster-c","token":null`) || !strings.Contains(raw, `"clusterId":"0","clusterName":"ac"`) {
		t.Fatalf("token answer lacks the suspended region or the platform entry: %s", raw)
	}
	i := strings.Index(raw, `"clusterId":"0","clusterName":"ac","token":"`) + len(`"clusterId":"0","clusterName":"ac","token":"`)
	plat := raw[i : i+strings.Index(raw[i:], `"`)]
	if a := b.get(t, "/ac/openapi/v2/center", plat); a.Code != apisim.ComputeCodePlatformInternal {
		t.Errorf("center with the platform token: %s", a.raw)
	}
	tok, _ := b.tokens(t)
	if a := b.get(t, "/ac/openapi/v2/center", tok); !strings.Contains(string(a.Data), b.srv.URL+`/efile"`) || !strings.Contains(string(a.Data), b.srv.URL+`/hpc"`) {
		t.Errorf("center URLs lack their segment: %s", a.Data)
	}
}

func TestComputeSimBurstAndMerge(t *testing.T) {
	t.Parallel()
	b := setupComputeSim(t, nil)
	tok, _ := b.tokens(t)
	chunk := func(n int, data string) csAnswer {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, f := range [][2]string{
			{"chunkNumber", strconv.Itoa(n)}, {"totalChunks", "2"}, {"totalSize", "7"}, {"chunkSize", "4"},
			{"currentChunkSize", strconv.Itoa(len(data))}, {"identifier", "id-1"}, {"filename", "f.txt"},
			{"relativePath", "f.txt"}, {"path", "/c"}, {"cover", "uncover"},
		} {
			_ = mw.WriteField(f[0], f[1])
		}
		fw, _ := mw.CreateFormFile("file", "f.txt")
		_, _ = fw.Write([]byte(data))
		_ = mw.Close()
		return b.do(t, http.MethodPost, "/efile/openapi/v2/file/burst", map[string]string{"token": tok}, &buf, mw.FormDataContentType())
	}
	merge := func() csAnswer {
		form := url.Values{"cover": {"uncover"}, "filename": {"f.txt"}, "identifier": {"id-1"}, "path": {"/c"}, "relativePath": {"f.txt"}}
		return b.do(t, http.MethodPost, "/efile/openapi/v2/file/merge", map[string]string{"token": tok}, strings.NewReader(form.Encode()), "application/x-www-form-urlencoded")
	}
	if a := chunk(1, "abcd"); a.Code != "0" {
		t.Fatalf("chunk 1: %s", a.raw)
	}
	if a := merge(); a.Code != apisim.ComputeCodeInvalid || !strings.Contains(a.Msg, "chunk 2 of 2 is missing") {
		t.Errorf("merge without chunk 2: %s", a.raw)
	}
	if _, ok := b.sim.File("/c/f.txt"); ok {
		t.Error("the target appeared before the merge")
	}
	if a := chunk(2, "efgh"); a.Code != "0" {
		t.Fatalf("chunk 2: %s", a.raw)
	}
	if a := merge(); a.Code != apisim.ComputeCodeInvalid || !strings.Contains(a.Msg, "totalSize") {
		t.Errorf("merge of 8 bytes announced as 7: %s", a.raw)
	}
	if a := chunk(2, "efg"); a.Code != "0" {
		t.Fatalf("chunk 2 again: %s", a.raw)
	}
	if a := merge(); a.Code != "0" {
		t.Fatalf("merge: %s", a.raw)
	}
	if got, _ := b.sim.File("/c/f.txt"); string(got) != "abcdefg" {
		t.Errorf("merged file = %q", got)
	}
}
