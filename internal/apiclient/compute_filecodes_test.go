package apiclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// The platform's file codes (platform-evidence.md section 7) read as
// named errors whose message a user reads as words, naming the path; the
// code stays in the error for the logs.
func TestComputeFileCodesAreNamedErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		code  string
		want  error
		words string
	}{
		{"911021", apiclient.ErrFileExists, "file exists: /data/in/a.txt"},
		{"911020", apiclient.ErrFileMissing, "file missing: /data/in/a.txt"},
		{"911030", apiclient.ErrNoPermission, "no permission on /data/in/a.txt"},
		{"911501", apiclient.ErrStorageFull, "storage full"},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.Contains(r.URL.Path, "/efile/") {
						w.Header().Set("Content-Type", "application/json")
						_, _ = io.WriteString(w, envelopeBody(tc.code, "操作失败"))
						return
					}
					h.ServeHTTP(w, r)
				})
			}})
			s := b.session(t)
			up := s.Upload(ctx, "/data/in", "a.txt", false, func() (io.ReadCloser, error) {
				return io.NopCloser(strings.NewReader("one")), nil
			})
			_, down := s.Download(ctx, "/data/in/a.txt")
			for what, err := range map[string]error{"upload": up, "download": down} {
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: err = %v, want %v", what, err, tc.want)
					continue
				}
				if !strings.Contains(err.Error(), tc.words) || !strings.Contains(err.Error(), tc.code) {
					t.Errorf("%s: %q does not say %q with code %s", what, err, tc.words, tc.code)
				}
			}
		})
	}
}
