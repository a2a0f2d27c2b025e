package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// clearFaultAfter makes the sleeper clear endpoint's fault after n waits.
func (b *mediaBundle) clearFaultAfter(endpoint string, n int) {
	b.sleep.OnWait(func(k int) {
		if k == n {
			b.sim.Faults().Set(endpoint, apisim.Fault{})
		}
	})
}

// TestMediaSubmitAmbiguous: a failure after upstream may have created the
// task is reported, never repeated.
func TestMediaSubmitAmbiguous(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fault   apisim.Fault
		created int64 // tasks the simulator created
	}{
		{"500 after the handler ran", apisim.Fault{Error500AfterRate: 1}, 1},
		{"truncated 200", apisim.Fault{TruncateRate: 1}, 1},
		{"malformed 200", apisim.Fault{MalformedRate: 1}, 1},
		{"hang until the attempt times out", apisim.Fault{HangRate: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupMedia(t, func(c *apiclient.MediaConfig) { c.AttemptTimeout = 300 * time.Millisecond })
			b.sim.Faults().Set(apisim.EndpointVideoSubmit, tt.fault)
			_, err := b.client.SubmitVideo(t.Context(), videoReq("paid once"))
			noSecret(t, err)
			if !errors.Is(err, apiclient.ErrAmbiguous) {
				t.Fatalf("err %v, want ErrAmbiguous", err)
			}
			if apiclient.IsTransient(err) || apiclient.IsPermanent(err) {
				t.Errorf("ambiguous error classified transient=%v permanent=%v", apiclient.IsTransient(err), apiclient.IsPermanent(err))
			}
			if n := b.sim.SubmitCount("paid once"); n != tt.created {
				t.Errorf("SubmitCount %d, want %d", n, tt.created)
			}
			// A hung request is counted only when its handler returns,
			// which may be after the client gave up: the waits show that
			// nothing was retried.
			if n := b.sim.Counters().Requests(apisim.EndpointVideoSubmit); n != 1 && tt.fault.HangRate == 0 {
				t.Errorf("%d submit requests, want exactly 1", n)
			}
			if w := b.sleep.Waits(); len(w) != 0 {
				t.Errorf("retried after an ambiguous failure: %v", w)
			}
		})
	}
}

// TestMediaSubmitRetriesWhenNothingWasCreated: 429 and 503 are retried,
// honouring Retry-After, and the task is created exactly once.
func TestMediaSubmitRetriesWhenNothingWasCreated(t *testing.T) {
	t.Parallel()
	t.Run("429", func(t *testing.T) {
		t.Parallel()
		b := setupMedia(t, nil)
		b.sim.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error429Rate: 1, RetryAfter: 7 * time.Second})
		b.clearFaultAfter(apisim.EndpointVideoSubmit, 2)
		task, err := b.client.SubmitVideo(t.Context(), videoReq("rate limited"))
		if err != nil {
			t.Fatal(err)
		}
		if task.Output.TaskID == "" || b.sim.SubmitCount("rate limited") != 1 {
			t.Fatalf("task %+v, SubmitCount %d", task, b.sim.SubmitCount("rate limited"))
		}
		if w := b.sleep.Waits(); len(w) != 2 || w[0] != 7*time.Second || w[1] != 7*time.Second {
			t.Errorf("waits %v, want two of 7s (Retry-After)", w)
		}
	})
	t.Run("503", func(t *testing.T) {
		t.Parallel()
		b := setupMedia(t, nil)
		var unavailable atomic.Int32
		unavailable.Store(2)
		b.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if unavailable.Add(-1) >= 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable) // no Retry-After: backoff
				_, _ = io.WriteString(w, `{"error":{"message":"busy","type":"server_error","param":null,"code":"service_unavailable"},"request_id":"r"}`)
				return
			}
			b.sim.ServeHTTP(w, r)
		})
		task, err := b.client.SubmitSpeechAsync(t.Context(), speechReq("busy upstream"))
		if err != nil || task.Output.TaskID == "" {
			t.Fatalf("%+v %v", task, err)
		}
		if n := b.sim.SubmitCount("busy upstream"); n != 1 {
			t.Errorf("SubmitCount %d", n)
		}
		if w := b.sleep.Waits(); len(w) != 2 || w[0] <= 0 || w[0] > 10*time.Second {
			t.Errorf("waits %v, want two backoff delays", w)
		}
	})
	t.Run("429 exhausted is transient, not ambiguous", func(t *testing.T) {
		t.Parallel()
		b := setupMedia(t, func(c *apiclient.MediaConfig) { c.MaxAttempts = 3 })
		b.sim.Faults().Set(apisim.EndpointSpeechSubmit, apisim.Fault{Error429Rate: 1, RetryAfter: 2 * time.Second})
		_, err := b.client.SubmitSpeechSync(t.Context(), speechReq("never"))
		if errors.Is(err, apiclient.ErrAmbiguous) || !apiclient.IsTransient(err) {
			t.Fatalf("err %v", err)
		}
		if d, ok := apiclient.RetryAfterOf(err); !ok || d != 2*time.Second {
			t.Errorf("RetryAfterOf = %v %v", d, ok)
		}
		if n := b.sim.Counters().Requests(apisim.EndpointSpeechSubmit); n != 3 {
			t.Errorf("%d requests, want MaxAttempts=3", n)
		}
		if n := b.sim.SubmitCount("never"); n != 0 {
			t.Errorf("SubmitCount %d", n)
		}
	})
	t.Run("Retry-After is capped", func(t *testing.T) {
		t.Parallel()
		b := setupMedia(t, nil)
		b.sim.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error429Rate: 1, RetryAfter: time.Hour})
		b.clearFaultAfter(apisim.EndpointVideoSubmit, 1)
		if _, err := b.client.SubmitVideo(t.Context(), videoReq("capped")); err != nil {
			t.Fatal(err)
		}
		if w := b.sleep.Waits(); len(w) != 1 || w[0] != time.Minute {
			t.Errorf("waits %v, want [1m]", w)
		}
	})
}

// refusingDialer dials a closed port (a real "connection refused") for
// the first n dials, then the real address.
func refusingDialer(t *testing.T, n int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	var dials atomic.Int32
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) <= n {
			return d.DialContext(ctx, network, closed)
		}
		return d.DialContext(ctx, network, addr)
	}
}

func TestMediaSubmitRetriesRefusedConnections(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, func(c *apiclient.MediaConfig) {
		c.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: refusingDialer(t, 2)}}
	})
	task, err := b.client.SubmitVideo(t.Context(), videoReq("after refusals"))
	if err != nil || task.Output.TaskID == "" {
		t.Fatalf("%+v %v", task, err)
	}
	if n := b.sim.SubmitCount("after refusals"); n != 1 {
		t.Errorf("SubmitCount %d", n)
	}
	if w := b.sleep.Waits(); len(w) != 2 {
		t.Errorf("waits %v, want 2", w)
	}

	t.Run("a closed server exhausts the attempts as transient", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		sleeps := &testenv.Sleeper{}
		c, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: url, APIKey: mediaKey, Sleep: sleeps.Sleep})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.SubmitVideo(t.Context(), videoReq("nobody home"))
		noSecret(t, err)
		if errors.Is(err, apiclient.ErrAmbiguous) || !apiclient.IsTransient(err) || len(sleeps.Waits()) != 4 {
			t.Fatalf("err %v after %d waits", err, len(sleeps.Waits()))
		}
	})
}

// resetAfterRead answers every request by reading its body and then
// dropping the connection: the request was certainly written.
func resetAfterRead(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestMediaResetAfterWrite(t *testing.T) {
	t.Parallel()
	srv := resetAfterRead(t)
	sleeps := &testenv.Sleeper{}
	c, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: srv.URL, APIKey: mediaKey, Sleep: sleeps.Sleep, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SubmitVideo(t.Context(), videoReq("reset"))
	if !errors.Is(err, apiclient.ErrAmbiguous) || len(sleeps.Waits()) != 0 {
		t.Fatalf("submit: %v after %d waits", err, len(sleeps.Waits()))
	}
	_, err = c.StreamSpeech(t.Context(), speechReq("reset"))
	if !errors.Is(err, apiclient.ErrAmbiguous) || len(sleeps.Waits()) != 0 {
		t.Fatalf("stream: %v after %d waits", err, len(sleeps.Waits()))
	}
	// The same failure on a query is simply retried.
	_, err = c.GetTask(t.Context(), "t")
	if errors.Is(err, apiclient.ErrAmbiguous) || !apiclient.IsTransient(err) || len(sleeps.Waits()) != 2 {
		t.Fatalf("get: %v after %d waits", err, len(sleeps.Waits()))
	}
}

// TestMediaIdempotentRetries: queries and cancel retry through 5xx, 429,
// truncated and malformed answers.
func TestMediaIdempotentRetries(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name  string
		fault apisim.Fault
	}{
		{"5xx", apisim.Fault{Error5xxRate: 1}},
		{"500 after", apisim.Fault{Error500AfterRate: 1}},
		{"429", apisim.Fault{Error429Rate: 1}},
		{"truncated", apisim.Fault{TruncateRate: 1}},
		{"malformed", apisim.Fault{MalformedRate: 1}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			b := setupMedia(t, nil)
			ctx := t.Context()
			task, err := b.client.SubmitVideo(ctx, videoReq("retried queries"))
			if err != nil {
				t.Fatal(err)
			}
			id := task.Output.TaskID

			b.sim.Faults().Set(apisim.EndpointTask, f.fault)
			b.clearFaultAfter(apisim.EndpointTask, 2)
			if got, err := b.client.GetTask(ctx, id); err != nil || got.Output.TaskID != id {
				t.Fatalf("get: %+v %v", got, err)
			}
			if n := b.sim.Counters().Requests(apisim.EndpointTask); n != 3 {
				t.Errorf("get: %d requests, want 3", n)
			}

			b.sleep = &testenv.Sleeper{}
			b.sim.Faults().Set(apisim.EndpointTasks, f.fault)
			b.clearFaultAfter(apisim.EndpointTasks, 1)
			b.client = rebuild(t, b)
			if got, err := b.client.GetTasks(ctx, []string{id}); err != nil || len(got) != 1 {
				t.Fatalf("batch: %+v %v", got, err)
			}

			if f.fault.Error500AfterRate > 0 || f.fault.TruncateRate > 0 || f.fault.MalformedRate > 0 {
				// The cancel took effect but its answer was lost: covered
				// by TestMediaCancelRetryAfterLostAnswer.
				return
			}
			b.sleep = &testenv.Sleeper{}
			b.sim.Faults().Set(apisim.EndpointCancel, f.fault)
			b.clearFaultAfter(apisim.EndpointCancel, 1)
			b.client = rebuild(t, b)
			if got, err := b.client.CancelTask(ctx, id); err != nil || got.Output.TaskStatus != apiclient.TaskCancelled {
				t.Fatalf("cancel: %+v %v", got, err)
			}
			if n := b.sim.SubmitCount("retried queries"); n != 1 {
				t.Errorf("SubmitCount %d", n)
			}
		})
	}
}

// rebuild makes a client of b's simulator that sleeps with b.sleep.
func rebuild(t *testing.T, b *mediaBundle) *apiclient.Media {
	t.Helper()
	c, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: b.srv.URL, APIKey: mediaKey, HTTPClient: b.srv.Client(), Sleep: b.sleep.Sleep, Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMediaCancelRetryAfterLostAnswer(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx := t.Context()
	task, err := b.client.SubmitVideo(ctx, videoReq("lost cancel"))
	if err != nil {
		t.Fatal(err)
	}
	b.sim.Faults().Set(apisim.EndpointCancel, apisim.Fault{Error500AfterRate: 1})
	b.clearFaultAfter(apisim.EndpointCancel, 1)
	_, err = b.client.CancelTask(ctx, task.Output.TaskID)
	if !errors.Is(err, apiclient.ErrTaskTerminal) {
		t.Fatalf("err %v, want ErrTaskTerminal (documented)", err)
	}
	got, err := b.client.GetTask(ctx, task.Output.TaskID)
	if err != nil || got.Output.TaskStatus != apiclient.TaskCancelled {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestMediaIdempotentGivesUp(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, func(c *apiclient.MediaConfig) { c.MaxAttempts = 4 })
	task, err := b.client.SubmitVideo(t.Context(), videoReq("given up"))
	if err != nil {
		t.Fatal(err)
	}
	b.sim.Faults().Set(apisim.EndpointTask, apisim.Fault{MalformedRate: 1})
	_, err = b.client.GetTask(t.Context(), task.Output.TaskID)
	if !errors.Is(err, apiclient.ErrMalformedResponse) || !apiclient.IsTransient(err) || errors.Is(err, apiclient.ErrAmbiguous) {
		t.Fatalf("err %v", err)
	}
	if n := b.sim.Counters().Requests(apisim.EndpointTask); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	if w := b.sleep.Waits(); len(w) != 3 {
		t.Errorf("waits %v", w)
	}
}

func TestMediaContextStopsRetries(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	b.sim.Faults().Set(apisim.EndpointTask, apisim.Fault{Error5xxRate: 1})
	b.sleep.OnWait(func(int) { cancel() })
	_, err := b.client.GetTask(ctx, "t")
	if !errors.Is(err, context.Canceled) || apiclient.IsTransient(err) {
		t.Fatalf("err %v", err)
	}
	if n := b.sim.Counters().Requests(apisim.EndpointTask); n != 1 {
		t.Errorf("%d requests after cancel", n)
	}
}

// TestMediaUndecodableSuccess: a 2xx that lacks the task id is malformed;
// on a submit that is ambiguous.
func TestMediaUndecodableSuccess(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"request_id": "r", "output": map[string]any{"task_status": "pending"}})
	}))
	t.Cleanup(srv.Close)
	c, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: srv.URL, APIKey: mediaKey, MaxAttempts: 2,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SubmitVideo(t.Context(), videoReq("p"))
	if !errors.Is(err, apiclient.ErrAmbiguous) || !errors.Is(err, apiclient.ErrMalformedResponse) || hits.Load() != 1 {
		t.Fatalf("submit: %v (%d hits)", err, hits.Load())
	}
	_, err = c.GetTask(t.Context(), "t")
	if !errors.Is(err, apiclient.ErrMalformedResponse) || hits.Load() != 3 {
		t.Fatalf("get: %v (%d hits)", err, hits.Load())
	}
}

// TestMediaSubmitQuotaExhausted: a submit answered 433 (the account's
// quota exhausted) created nothing and is not retried by the client: it
// is ErrQuotaExhausted, neither transient nor permanent, and keeps
// upstream's message.
func TestMediaSubmitQuotaExhausted(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	b.sim.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error433Rate: 1})
	_, err := b.client.SubmitVideo(t.Context(), videoReq("over quota"))
	noSecret(t, err)
	if !errors.Is(err, apiclient.ErrQuotaExhausted) || errors.Is(err, apiclient.ErrAmbiguous) {
		t.Fatalf("err %v, want ErrQuotaExhausted and not ErrAmbiguous", err)
	}
	if apiclient.IsTransient(err) || apiclient.IsPermanent(err) {
		t.Errorf("433 classified transient=%v permanent=%v", apiclient.IsTransient(err), apiclient.IsPermanent(err))
	}
	if ae, ok := errors.AsType[*apiclient.APIError](err); !ok || ae.Message != apisim.QuotaExhaustedMessage {
		t.Errorf("err %v, want upstream's message %q", err, apisim.QuotaExhaustedMessage)
	}
	if n := b.sim.SubmitCount("over quota"); n != 0 {
		t.Errorf("SubmitCount %d, want 0", n)
	}
	if n := b.sim.Counters().Requests(apisim.EndpointVideoSubmit); n != 1 {
		t.Errorf("%d submit requests, want 1", n)
	}
}

// TestMediaSubmitConcurrencyConflict: a submit answered 433 with code
// 10007 (too many tasks at once, platform-evidence.md section 6) created
// nothing and is not retried by the client: it is ErrConcurrencyConflict,
// not ErrQuotaExhausted, neither transient nor permanent, and keeps
// upstream's code and message.
func TestMediaSubmitConcurrencyConflict(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	b.sim.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{ConcurrencyRate: 1})
	_, err := b.client.SubmitVideo(t.Context(), videoReq("too many at once"))
	noSecret(t, err)
	if !errors.Is(err, apiclient.ErrConcurrencyConflict) || errors.Is(err, apiclient.ErrQuotaExhausted) || errors.Is(err, apiclient.ErrAmbiguous) {
		t.Fatalf("err %v, want ErrConcurrencyConflict only", err)
	}
	if apiclient.IsTransient(err) || apiclient.IsPermanent(err) {
		t.Errorf("433/10007 classified transient=%v permanent=%v", apiclient.IsTransient(err), apiclient.IsPermanent(err))
	}
	if c := apiclient.Classify(err); c != apiclient.ClassBusy {
		t.Errorf("class %s, want busy", c)
	}
	if ae, ok := errors.AsType[*apiclient.APIError](err); !ok || ae.Code != apisim.ConcurrencyConflictCode || ae.Message != apisim.ConcurrencyConflictMessage {
		t.Errorf("err %v, want upstream's code %s and message %q", err, apisim.ConcurrencyConflictCode, apisim.ConcurrencyConflictMessage)
	}
	if n := b.sim.SubmitCount("too many at once"); n != 0 {
		t.Errorf("SubmitCount %d, want 0", n)
	}
	if n := b.sim.Counters().Requests(apisim.EndpointVideoSubmit); n != 1 {
		t.Errorf("%d submit requests, want 1", n)
	}
}
