package runner

import (
	"strings"
	"testing"
)

// A refused cancel request says what is wrong with it.
func TestDecodeCancelNamesTheProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"jobid":"clip-1"}`, `unknown field "jobid": body must be {"job_id":"..."}`},
		{`{"job_id":"clip-1","force":true}`, `unknown field "force"`},
		{`{}`, `job_id is required`},
		{`{"job_id":7}`, `job_id must be a string, not number`},
		{`clip-1`, `not a JSON object`},
		{``, `not a JSON object`},
		{`{"job_id":"a"}{"job_id":"b"}`, `more than one JSON value`},
		{`{"` + strings.Repeat("x", 5000) + `":1}`, `unknown field "xxxx`},
	} {
		_, err := decodeCancel([]byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("decodeCancel(%.40q) = %v, want %q", tc.body, err, tc.want)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("decodeCancel(%.40q): %d-byte error", tc.body, len(err.Error()))
		}
	}
	req, err := decodeCancel([]byte(`{"job_id":"clip-1"}`))
	if err != nil || req.JobID != "clip-1" {
		t.Errorf("valid request: %+v, %v", req, err)
	}
}
