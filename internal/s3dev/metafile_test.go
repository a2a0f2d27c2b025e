package s3dev

import (
	"bytes"
	"net/http"
	"os"
	"testing"
)

// The metadata record's file name is the backend's private business:
// this fails when a new version of it names the file differently, so
// adopt would not see the records the backend writes.
func TestMetaFileIsTheBackends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := Start(t.Context(), Config{Dir: dir, Buckets: []string{"bkt"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, key := range []string{"top", "a/b/c.mp4", `odd\name with spaces.txt`} {
		req, _ := http.NewRequest(http.MethodPut, srv.Endpoint()+"/bkt/"+key, bytes.NewReader([]byte("x")))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT %s: %d", key, resp.StatusCode)
		}
		if _, err := os.Stat((&backend{dir: dir}).metaFile("bkt", key)); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
}
