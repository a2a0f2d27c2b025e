package apiclient_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

func TestJobPhaseOf(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	tests := []struct {
		name   string
		status string
		state  string
		end    *string
		exit   *string
		want   apiclient.JobPhase
	}{
		{"queued", "statQ", "QUEUED", nil, nil, apiclient.JobQueued},
		{"held", "statH", "", nil, nil, apiclient.JobQueued},
		{"pending state only", "", "PENDING", nil, nil, apiclient.JobQueued},
		{"running", "statR", "RUNNING", nil, nil, apiclient.JobRunning},
		{"running lower case", "", "running", nil, nil, apiclient.JobRunning},
		{"suspended", "statS", "", nil, nil, apiclient.JobRunning},
		{"exiting without exit code", "statE", "EXITING", nil, nil, apiclient.JobRunning},
		{"exiting with exit code 0", "statE", "", nil, str("0"), apiclient.JobSucceeded},
		{"completed 0", "statC", "COMPLETED", str("2026-11-22 10:00:00"), str("0"), apiclient.JobSucceeded},
		{"completed 3", "statC", "COMPLETED", str("2026-11-22 10:00:00"), str("3"), apiclient.JobFailed},
		{"completed without exit code", "statC", "", nil, nil, apiclient.JobFailed},
		{"exit:signal 0:0", "", "COMPLETED", nil, str("0:0"), apiclient.JobSucceeded},
		{"exit:signal 0:9", "", "COMPLETED", nil, str("0:9"), apiclient.JobFailed},
		{"done", "DONE", "", nil, str(" 0 "), apiclient.JobSucceeded},
		{"finished", "statF", "FINISHED", nil, str("0"), apiclient.JobSucceeded},
		{"cancelled despite exit 0", "", "CANCELLED", nil, str("0"), apiclient.JobCancelled},
		{"failed", "statD", "", nil, nil, apiclient.JobFailed},
		{"failed state beats running status", "statR", "FAILED", nil, nil, apiclient.JobFailed},
		{"timeout", "", "TIMEOUT", nil, str("0"), apiclient.JobFailed},
		{"unknown value keeps polling", "statZ", "MIGRATING", nil, nil, apiclient.JobUnknown},
		{"empty keeps polling", "", "", nil, nil, apiclient.JobUnknown},
		{"end time ends an unknown status", "statZ", "", str("2026-11-22 10:00:00"), str("0"), apiclient.JobSucceeded},
		{"end time without exit code", "statR", "", str("2026-11-22 10:00:00"), nil, apiclient.JobFailed},
		{"null-ish end time is absent", "statR", "", str("null"), nil, apiclient.JobRunning},
		{"dash end time is absent", "statQ", "", str("-"), nil, apiclient.JobQueued},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &apiclient.JobDetail{JobStatus: tt.status, JobEndTime: tt.end, ExitCode: tt.exit}
			if tt.state != "" {
				d.JobInitAttr = map[string]string{"JobState": tt.state}
			}
			if got := apiclient.JobPhaseOf(d); got != tt.want {
				t.Errorf("JobPhaseOf(%s/%s end %v exit %v) = %s, want %s", tt.status, tt.state, deref(tt.end), deref(tt.exit), got, tt.want)
			}
		})
	}
	if got := apiclient.JobPhaseOf(nil); got != apiclient.JobUnknown {
		t.Errorf("JobPhaseOf(nil) = %s", got)
	}
	d := &apiclient.JobDetail{JobInitAttr: map[string]string{"jobstate": "RUNNING"}}
	if got := apiclient.JobPhaseOf(d); got != apiclient.JobRunning {
		t.Errorf("lower-case JobState key: %s", got)
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

func TestJobPhaseTerminal(t *testing.T) {
	t.Parallel()
	for p, want := range map[apiclient.JobPhase]bool{
		apiclient.JobQueued: false, apiclient.JobRunning: false, apiclient.JobUnknown: false,
		apiclient.JobSucceeded: true, apiclient.JobFailed: true,
	} {
		if p.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", p, !want)
		}
	}
}

func TestComputeLenientTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		into  any
		check func(v any) error
	}{
		{"numeric envelope code", `{"code":0,"msg":"success","data":[1]}`, &apiclient.Envelope{}, func(v any) error {
			e := v.(*apiclient.Envelope)
			if e.Code != "0" || string(e.Data) != "[1]" {
				return fmt.Errorf("%+v", e)
			}
			return nil
		}},
		{"null data", `{"code":"0","msg":"success","data":null}`, &apiclient.Envelope{}, func(v any) error {
			if e := v.(*apiclient.Envelope); e.Data != nil {
				return fmt.Errorf("data = %s", e.Data)
			}
			return nil
		}},
		{"numeric cluster id in token", `{"clusterId":1001,"clusterName":"a","token":"t"}`, &apiclient.TokenEntry{}, func(v any) error {
			if e := v.(*apiclient.TokenEntry); e.ClusterID != "1001" {
				return fmt.Errorf("%v", e.ClusterID)
			}
			return nil
		}},
		{"string scheduler id", `{"id":"2001","text":"s"}`, &apiclient.Cluster{}, func(v any) error {
			if c := v.(*apiclient.Cluster); c.ID != 2001 {
				return fmt.Errorf("id = %d", c.ID)
			}
			return nil
		}},
		{"boolean enable", `{"efileUrls":[{"enable":true,"url":"http://x"}],"clusterUserInfo":{"userName":"u"}}`, &apiclient.Center{}, func(v any) error {
			c := v.(*apiclient.Center)
			if len(c.EfileURLs) != 1 || c.EfileURLs[0].Enable != "true" || c.ClusterUserInfo.UserName != "u" {
				return fmt.Errorf("%+v", c)
			}
			return nil
		}},
		{"numeric queue values", `{"queueName":"q","queMaxPPN":64,"queChargeRate":1.5}`, &apiclient.Queue{}, func(v any) error {
			if q := v.(*apiclient.Queue); q.QueMaxPPN != "64" || q.QueChargeRate != "1.5" {
				return fmt.Errorf("%+v", q)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := json.Unmarshal([]byte(tt.input), tt.into); err != nil {
				t.Fatal(err)
			}
			if err := tt.check(tt.into); err != nil {
				t.Error(err)
			}
		})
	}
	var c apiclient.Cluster
	err := json.Unmarshal([]byte(`{"id":"abc"}`), &c)
	if err == nil || !strings.Contains(err.Error(), "Cluster.id") {
		t.Errorf("non-numeric scheduler id: err = %v, want an error naming id", err)
	}
}
