package apiclient_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// FuzzEnvelopeDecode feeds arbitrary bytes to the compute wire decoders:
// they may refuse, never panic. The seed corpus is in
// testdata/fuzz/FuzzEnvelopeDecode.
func FuzzEnvelopeDecode(f *testing.F) {
	f.Add([]byte(`{"code":"0","msg":"success","data":[{"clusterId":"1001","clusterName":"a","token":"t"}]}`))
	f.Add([]byte(`{"code":0,"msg":null,"data":{"jobId":1,"exitCode":3,"jobInitAttr":{"JobState":"RUNNING"}}}`))
	f.Add([]byte(`{"code":"10002","msg":"token expired","data":null}`))
	f.Add([]byte(`{"code":"0","data":"12345"}`))
	f.Add([]byte(`{"code":"0","data":{"efileUrls":[{"enable":true,"url":"http://x"}],"id":"1"}}`))
	f.Add([]byte(`{"code":"0","data":[{"id":"9e99","text":1}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"code":[],"msg":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var env apiclient.Envelope
		if err := json.Unmarshal(b, &env); err != nil {
			return
		}
		for _, data := range [][]byte{env.Data, b} {
			var d apiclient.JobDetail
			if json.Unmarshal(data, &d) == nil {
				_ = apiclient.JobPhaseOf(&d)
				_ = d.JobState()
			}
			var toks []apiclient.TokenEntry
			_ = json.Unmarshal(data, &toks)
			var c apiclient.Center
			_ = json.Unmarshal(data, &c)
			var cl []apiclient.Cluster
			_ = json.Unmarshal(data, &cl)
			var q []apiclient.Queue
			_ = json.Unmarshal(data, &q)
		}
	})
}

// platformCodes are the envelope codes the platform is seen to answer
// (platform-evidence.md sections 3, 4, 5 and 7), and the simulator's.
var platformCodes = []string{"0", "10001", "10002", "10003", "10004", "10007", "10008", "10009", "10010", "10011", "10012",
	"716865", "716866", "911020", "911021", "911030", "911501", "20001", "20002", "50001", ""}

// missingTexts are the messages the evidence reads as "does not exist".
var missingTexts = []string{"不存在", "does not exist", "not exist", "not found", "no such job"}

// FuzzAnswerClasses answers every route that reads a job, an instance,
// the history or a list with an arbitrary status, envelope code, message
// and data, and checks that no answer shape is read as "gone" by
// accident: a busy 10001 is never missing, an error envelope is missing
// only when its message says so, a status other than 404 never is, and a
// list answered with an error envelope is an error, never an empty list.
func FuzzAnswerClasses(f *testing.F) {
	msgs := []string{"success", "internal error", "任务不存在", "job does not exist", "permission denied", "token expired", ""}
	for i, code := range platformCodes {
		for _, status := range []uint16{200, 404, 500} {
			f.Add(status, code, msgs[i%len(msgs)], `null`)
		}
		f.Add(uint16(200), code, "instance not found", `{"id":"x","status":"Running"}`)
	}
	f.Add(uint16(200), "0", "success", `[]`)
	f.Add(uint16(200), "0", "success", `{"list":[]}`)
	f.Add(uint16(503), "503", "busy", `null`)
	f.Add(uint16(405), "", "", `not json`)
	var cur atomic.Pointer[cannedAnswer]
	b := setupCompute(f, computeOpts{
		client: func(c *apiclient.ComputeConfig) { c.MaxAttempts = 1 },
		wrap:   withCanned(&cur),
	})
	s, err := b.client.Cluster(context.Background(), "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status uint16, code, msg, data string) {
		st := int(status)%400 + 200 // 200..599
		body := data
		if code != "" {
			raw := json.RawMessage(data)
			if !json.Valid(raw) {
				raw, _ = json.Marshal(data)
			}
			bb, _ := json.Marshal(map[string]any{"code": code, "msg": msg, "data": raw})
			body = string(bb)
		}
		cur.Store(&cannedAnswer{status: st, body: body})
		defer cur.Store(nil)
		checkAnswerClasses(t, s, st, code, msg)
	})
}

// checkAnswerClasses calls each route against the current canned answer.
func checkAnswerClasses(t *testing.T, s *apiclient.ClusterSession, status int, code, msg string) {
	ctx := context.Background()
	errEnvelope := status >= 200 && status < 300 && code != "" && code != "0"
	saysMissing := slices.ContainsFunc(missingTexts, func(m string) bool { return strings.Contains(strings.ToLower(msg), m) })
	reads := map[string]error{}
	_, reads["instance detail"] = s.Instance(ctx, "inst1")
	_, reads["job detail"] = s.Job(ctx, "4001")
	_, reads["job history"] = s.HistoryJob(ctx, "4001", apiclient.HistoryQuery{SchedulerID: "2001"})
	reads["cancel"] = s.CancelJob(ctx, "2001", "alice", "4001")
	for name, err := range reads {
		class := apiclient.Classify(err)
		switch {
		case class != apiclient.ClassMissing:
		case errEnvelope && code == "10001":
			t.Errorf("%s: busy 10001 (%q) read as missing: %v", name, msg, err)
		case errEnvelope && !saysMissing:
			t.Errorf("%s: error envelope %s %q read as missing: %v", name, code, msg, err)
		case status != 404 && !(status >= 200 && status < 300):
			t.Errorf("%s: HTTP %d read as missing: %v", name, status, err)
		}
	}
	if !errEnvelope {
		return
	}
	lists := map[string]error{}
	_, lists["instance list"] = s.Instances(ctx)
	_, lists["job list"] = s.Jobs(ctx, "2001")
	_, lists["history list"] = s.HistoryJobs(ctx, apiclient.HistoryQuery{SchedulerID: "2001"}, nil)
	for name, err := range lists {
		if err == nil {
			t.Errorf("%s: error envelope %s %q read as a list", name, code, msg)
		}
	}
}
