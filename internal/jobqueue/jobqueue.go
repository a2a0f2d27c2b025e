// Package jobqueue reads SLUICE_JOBS on behalf of the producer side: it
// finds the message of a job that no worker has taken yet, so that status
// and cancel can tell a queued job from one that exists nowhere.
package jobqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

// ErrNotWaiting is returned by Find when no message of the job is in
// SLUICE_JOBS (or the stream does not exist).
var ErrNotWaiting = errors.New("no message of the job waits in " + contract.JobsStream)

// Waiting is a job's message in SLUICE_JOBS.
type Waiting struct {
	// JobID is the job's id (docs/job-spec.md).
	JobID string
	// Kind is the kind the message belongs to (contract.KindOfMessage).
	Kind string
	// Subject is the subject it was published to.
	Subject string
	// Seq is its stream sequence.
	Seq uint64
	// Published is when the stream stored it.
	Published time.Time
}

// Find returns the message of job id in SLUICE_JOBS: one that no worker
// has finished yet (it may be held by a worker that has not written the
// job's record yet, or wait for a retry). It returns ErrNotWaiting when
// there is none.
//
// JetStream indexes messages by subject, not by header, and every job of a
// kind shares one subject; so an id of the form js-<sequence> costs one
// request, and any other id reads the waiting messages one request each,
// oldest first, until it finds the job: the cost grows with the depth of
// the queue (see BENCHMARKS.md), and is paid only for an id that has no
// state record.
func Find(ctx context.Context, js jetstream.JetStream, id string) (*Waiting, error) {
	stream, err := js.Stream(ctx, contract.JobsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, ErrNotWaiting
	}
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", contract.JobsStream, err)
	}
	if seq, ok := seqOfID(id); ok {
		raw, err := stream.GetMsg(ctx, seq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return nil, fmt.Errorf("read %s message %d: %w", contract.JobsStream, seq, err)
		case JobID(raw) == id:
			return waiting(id, raw), nil
		}
	}
	info := stream.CachedInfo()
	for seq := max(info.State.FirstSeq, 1); ; {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(contract.JobsSubjectPrefix+">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, ErrNotWaiting
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", contract.JobsStream, err)
		}
		if JobID(raw) == id {
			return waiting(id, raw), nil
		}
		seq = raw.Sequence + 1
	}
}

func waiting(id string, raw *jetstream.RawStreamMsg) *Waiting {
	return &Waiting{
		JobID: id, Kind: contract.KindOfMessage(raw.Subject, raw.Data),
		Subject: raw.Subject, Seq: raw.Sequence, Published: raw.Time,
	}
}

// JobID is the job id of a stored message, by the rule the worker uses
// (docs/job-spec.md).
func JobID(raw *jetstream.RawStreamMsg) string {
	var spec struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw.Data, &spec)
	return jobspec.JobID(spec.ID, contract.MessageID(raw.Subject, raw.Header), raw.Sequence)
}

// seqOfID returns N for an id js-N.
func seqOfID(id string) (uint64, bool) {
	n, ok := strings.CutPrefix(id, "js-")
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	return seq, err == nil && seq > 0
}
