package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// Cancels routes cancel requests to the jobs this worker holds. The zero
// value is not usable; use NewCancels.
type Cancels struct {
	mu   sync.Mutex
	jobs map[string]*cancelEntry
}

type cancelEntry struct {
	ch chan struct{}
	// hook, when set, is called after ch is closed (see onCancel).
	hook func()
}

// NewCancels returns an empty registry.
func NewCancels() *Cancels { return &Cancels{jobs: make(map[string]*cancelEntry)} }

// register returns a channel closed when a cancel of id arrives.
func (c *Cancels) register(id string) (<-chan struct{}, func()) {
	e := &cancelEntry{ch: make(chan struct{})}
	c.mu.Lock()
	c.jobs[id] = e
	c.mu.Unlock()
	return e.ch, func() {
		c.mu.Lock()
		if c.jobs[id] == e {
			delete(c.jobs, id)
		}
		c.mu.Unlock()
	}
}

// onCancel makes a cancel of id also call hook, for a job that waits
// without a goroutine to select on the channel register returned (ch). It
// reports false, and sets nothing, when that registration has ended or
// another delivery of the job registered since; a cancel that already
// arrived closed ch, which the caller checks itself.
func (c *Cancels) onCancel(id string, ch <-chan struct{}, hook func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.jobs[id]
	if e == nil || e.ch != ch {
		return false
	}
	e.hook = hook
	return true
}

// notify closes the cancel channel of id (and calls its hook); it reports
// whether this worker holds the job.
func (c *Cancels) notify(id string) bool {
	c.mu.Lock()
	e, ok := c.jobs[id]
	if ok {
		delete(c.jobs, id)
		close(e.ch)
	}
	c.mu.Unlock()
	if ok && e.hook != nil {
		e.hook()
	}
	return ok
}

// ServeCancels subscribes every worker to sluice.control.cancel (no queue
// group: each worker must learn of the request in case it holds the job).
// Each sets the cancel flag in SLUICE_STATE (idempotent), wakes the job if
// it runs here, and answers a request; the requester keeps the first
// answer. The subscription ends with ctx.
func ServeCancels(ctx context.Context, nc *nats.Conn, store *state.Store, c *Cancels, log zerolog.Logger) error {
	sub, err := nc.Subscribe(contract.CancelSubject, func(m *nats.Msg) {
		reply := handleCancel(ctx, store, c, m.Data)
		if reply.Error != "" {
			log.Warn().Str("job_id", reply.JobID).Str("error", reply.Error).Msg("cancel request refused")
		} else {
			log.Info().Str("job_id", reply.JobID).Str("cancel", reply.Cancel).Msg("cancel request")
		}
		if m.Reply != "" {
			b, _ := json.Marshal(reply)
			_ = m.Respond(b)
		}
	})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = sub.Unsubscribe()
	}()
	return nil
}

// decodeCancel reads a cancel request; its error names what is wrong (an
// unknown field such as "jobid", a missing job_id, a body that is not a JSON
// object) and the expected shape.
func decodeCancel(body []byte) (contract.CancelRequest, error) {
	const shape = `body must be {"job_id":"..."}`
	var req contract.CancelRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil && req.JobID == "":
		return req, errors.New("job_id is required: " + shape)
	case err == nil:
		return req, nil
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// The name is the requester's text: cut, so a hostile one cannot
		// blow up the reply and the log line.
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if len(name) > 66 {
			name = strings.ToValidUTF8(name[:64], "") + `..."`
		}
		return req, fmt.Errorf("unknown field %s: %s", name, shape)
	case errors.As(err, &typ) && typ.Field != "":
		return req, fmt.Errorf("%s must be a %s, not %s: %s", typ.Field, typ.Type, typ.Value, shape)
	case errors.As(err, &syntax), errors.As(err, &typ), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return req, errors.New("not a JSON object: " + shape)
	}
	return req, fmt.Errorf("%v: %s", err, shape)
}

func handleCancel(ctx context.Context, store *state.Store, c *Cancels, body []byte) contract.CancelReply {
	req, err := decodeCancel(body)
	if err != nil {
		return contract.CancelReply{Error: err.Error()}
	}
	if !jobspec.ValidID(req.JobID) {
		return contract.CancelReply{JobID: req.JobID, Error: "job_id must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rec, err := store.RequestCancel(ctx, req.JobID)
	if err != nil {
		return contract.CancelReply{JobID: req.JobID, Error: "cannot record the cancel: " + err.Error()}
	}
	c.notify(req.JobID)
	if rec.Status.Terminal() {
		return contract.CancelReply{JobID: req.JobID, Cancel: contract.CancelTerminal, Status: string(rec.Status)}
	}
	return contract.CancelReply{JobID: req.JobID, Cancel: contract.CancelRequested, Status: string(rec.Status)}
}
