package jobclient

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

// DeadLetter is one message of SLUICE_DLQ.
type DeadLetter struct {
	// Seq is its sequence in SLUICE_DLQ: the handle for a letter without
	// a job id.
	Seq uint64 `json:"seq"`
	// JobID is the Sluice-Job-Id header, when known.
	JobID string `json:"job_id,omitempty"`
	// Kind is the subject's last token.
	Kind string `json:"kind"`
	// Reason is the Sluice-Error header.
	Reason string `json:"reason"`
	// Code is the error code the reason starts with, when it does.
	Code string `json:"code,omitempty"`
	// Time is when it was dead-lettered.
	Time time.Time `json:"time"`
	// Size is the message's length in bytes.
	Size int `json:"size"`
	// Data is the message as it arrived (the spec); only DeadLetters with
	// WithData fills it.
	Data []byte `json:"-"`
}

// DLQFilter selects dead letters. Every field that is set must match.
type DLQFilter struct {
	// IDs keeps the letters of these job ids.
	IDs []string
	// Seqs keeps the letters with these sequences.
	Seqs []uint64
	// Kind keeps the letters of one kind.
	Kind jobspec.Kind
	// Since keeps the letters of this past period.
	Since time.Duration
	// Reason keeps the letters whose code is Reason, or whose reason
	// contains it.
	Reason string
	// WithData fills DeadLetter.Data.
	WithData bool
}

func (f DLQFilter) match(d *DeadLetter) bool {
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, d.JobID) {
		return false
	}
	if len(f.Seqs) > 0 && !slices.Contains(f.Seqs, d.Seq) {
		return false
	}
	if f.Reason != "" && d.Code != f.Reason && !strings.Contains(d.Reason, f.Reason) {
		return false
	}
	return true
}

// codePrefix is an error code at the start of a Sluice-Error reason.
var codePrefix = regexp.MustCompile(`^([a-z][a-z0-9_]*): `)

// DeadLetters returns the letters of SLUICE_DLQ that f selects, oldest
// first. The server filters by kind and time; the rest is matched here.
func (c *Client) DeadLetters(ctx context.Context, f DLQFilter) ([]DeadLetter, error) {
	if f.Kind != "" && !f.Kind.Valid() {
		return nil, fmt.Errorf("dead letters: kind: want %s, got %q", strings.Join(contract.Kinds, ", "), f.Kind)
	}
	if f.Since < 0 {
		return nil, fmt.Errorf("dead letters: since must not be negative, got %s", f.Since)
	}
	subject := contract.DLQSubjectPrefix + ">"
	if f.Kind != "" {
		subject = contract.DLQSubject(string(f.Kind))
	}
	q := query{stream: contract.DLQStream, subjects: []string{subject}, headersOnly: !f.WithData}
	if f.Since > 0 {
		q.start = c.now().Add(-f.Since)
	}
	out := []DeadLetter{}
	err := c.scan(ctx, q, func(m jetstream.Msg) bool {
		d := deadLetter(m, f.WithData)
		if f.match(&d) {
			out = append(out, d)
		}
		return true
	})
	return out, err
}

func deadLetter(m jetstream.Msg, withData bool) DeadLetter {
	h := m.Headers()
	d := DeadLetter{
		JobID:  h.Get(contract.HeaderJobID),
		Kind:   strings.TrimPrefix(m.Subject(), contract.DLQSubjectPrefix),
		Reason: h.Get(contract.HeaderError),
		Size:   len(m.Data()),
	}
	if withData {
		d.Data = m.Data()
	} else if n, err := parseSize(h.Get("Nats-Msg-Size")); err == nil {
		d.Size = n
	}
	if sm := codePrefix.FindStringSubmatch(d.Reason); sm != nil {
		d.Code = sm[1]
	}
	if meta, err := m.Metadata(); err == nil {
		d.Seq, d.Time = meta.Sequence.Stream, meta.Timestamp.UTC()
	}
	return d
}

func parseSize(s string) (int, error) {
	var n int
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// Replay runs the job of dead letter d again as a retry (see Retry): its
// message, as it arrived, is the spec. Retry's rules hold for the job the
// letter names: one that has not ended is refused, one that succeeded,
// ended submit_ambiguous or has no record needs o.Force. A letter whose spec is invalid
// cannot be replayed. Once
// the retry is queued the letter is removed from SLUICE_DLQ.
func (c *Client) Replay(ctx context.Context, d DeadLetter, o RetryOptions) (*RetryResult, error) {
	if d.Data == nil {
		return nil, errors.New("replay: the dead letter was read without its message")
	}
	if d.Code == CodeSubmitAmbiguous && !o.Force {
		return nil, fmt.Errorf("replay %s: %w", d.name(), ErrMayPayTwice)
	}
	id := d.JobID
	if !jobspec.ValidID(id) {
		return nil, fmt.Errorf("%w dead letter %d: it has no job id", ErrNotRetryable, d.Seq)
	}
	// A letter may be a stray copy of a job a worker holds, or of one that
	// ended since: Retry's rules apply to the job it names. Without a
	// record sluice cannot tell a job no worker recorded from one whose
	// record expired (SLUICE_STATE_TTL) or was purged after it ran, even
	// succeeded: that replay may pay twice and needs o.Force.
	job, err := c.Status(ctx, id)
	switch {
	case errors.Is(err, ErrNoSuchJob):
		if !o.Force {
			return nil, fmt.Errorf("replay %s: it has no record (never recorded, expired or purged): %w", id, ErrMayPayTwice)
		}
	case err != nil:
		return nil, err
	default:
		if err := mayRunAgain(job, o); err != nil {
			return nil, err
		}
	}
	tenant := ""
	if job != nil {
		tenant = job.Tenant
	}
	res, err := c.rerun(ctx, id, tenant, d.Data, o)
	if err != nil {
		return nil, err
	}
	if err := c.PurgeDeadLetter(ctx, d.Seq); err != nil {
		return res, fmt.Errorf("replayed %s as %s, but could not remove the dead letter: %w", id, res.RetryID, err)
	}
	return res, nil
}

func (d *DeadLetter) name() string {
	if d.JobID != "" {
		return d.JobID
	}
	return fmt.Sprintf("dead letter %d", d.Seq)
}

// PurgeDeadLetter removes the letter with sequence seq from SLUICE_DLQ. A
// letter already gone is not an error.
func (c *Client) PurgeDeadLetter(ctx context.Context, seq uint64) error {
	rctx, stop := c.refusable(ctx, "$JS.API.STREAM.INFO."+contract.DLQStream, "$JS.API.STREAM.MSG.DELETE."+contract.DLQStream)
	defer stop()
	s, err := c.js.Stream(rctx, contract.DLQStream)
	if err == nil {
		err = s.DeleteMsg(rctx, seq)
	}
	if refused := refusedBy(rctx); refused != nil {
		return fmt.Errorf("remove dead letter %d: %w", seq, &ReadRefusedError{Stream: contract.DLQStream, Err: refused})
	}
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w (stream %s does not exist)", ErrNotSetUp, contract.DLQStream)
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("remove dead letter %d: %w", seq, c.jsErr(err))
	}
	return nil
}
