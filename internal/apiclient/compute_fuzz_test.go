package apiclient_test

import (
	"encoding/json"
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
