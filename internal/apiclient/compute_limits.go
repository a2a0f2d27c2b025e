package apiclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrMinGRES is matched when the scheduler refused a submitted job for
// asking fewer generic resources (DCUs, GPUs) than its queue's minimum:
// Slurm's QOS reason QOSMinGRES in the answer's msg. Some DCU queues of
// the platform refuse a job without GAP_NDCU >= 1 so
// (platform-evidence.md section 7). Nothing was created, and the same
// job is refused again: the job's shape must change.
var ErrMinGRES = errors.New("apiclient: the queue refuses a job with fewer DCUs or GPUs than its minimum (QOSMinGRES)")

// minGRESMarker is the scheduler's reason by which an answer says
// ErrMinGRES. The platform has no code for it; its message carries the
// scheduler's own word.
const minGRESMarker = "qosmingres"

// saysMinGRES reports whether a refusal (not a busy answer) carries the
// scheduler's QOSMinGRES.
func (e *EnvelopeError) saysMinGRES() bool {
	return !e.busy() && strings.Contains(strings.ToLower(e.Msg), minGRESMarker)
}

// submitError marks a refused submit whose message says QOSMinGRES as
// ErrMinGRES; any other error, an ambiguous one first, is returned as it
// is.
func submitError(err error) error {
	if env, ok := errors.AsType[*EnvelopeError](err); ok && env.saysMinGRES() && !errors.Is(err, ErrAmbiguous) {
		return fmt.Errorf("%w: %w", ErrMinGRES, err)
	}
	return err
}

// QueueLimits reads the limits of the queues of scheduler schedulerID
// (GET .../userquotas/queues?strJobManagerID=, platform-evidence.md
// section 7; not in compute-api.md). An empty schedulerID means
// SchedulerID(ctx). The answer's data may be the list itself or an object
// holding it (list, records, items, rows); its entries are read as Queue
// leniently. Retried on network errors, 429 and 5xx.
//
// Errors: ErrNotSupported when the platform has no such route
// (compute-api.md's letter), ErrMalformedResponse, *EnvelopeError, network
// errors.
func (s *ClusterSession) QueueLimits(ctx context.Context, schedulerID string) ([]Queue, error) {
	schedulerID, err := s.schedulerOr(ctx, schedulerID)
	if err != nil {
		return nil, err
	}
	res, err := s.c.exchange(ctx, s, &request{
		op: "queue limits", method: http.MethodGet, svc: svcHPC, auth: true,
		path:  "/hpc/openapi/v2/userquotas/queues",
		query: url.Values{"strJobManagerID": {schedulerID}},
		class: classIdempotent,
	})
	if err != nil {
		if env, ok := errors.AsType[*EnvelopeError](err); ok && env.noRoute() {
			return nil, fmt.Errorf("%w: %w", ErrNotSupported, err)
		}
		return nil, err
	}
	items, _, err := listItems(res.data)
	if err != nil {
		return nil, fmt.Errorf("apiclient: compute queue limits: %w: %w", ErrMalformedResponse, err)
	}
	out := make([]Queue, 0, len(items))
	for _, item := range items {
		var q Queue
		if err := json.Unmarshal(item, &q); err != nil {
			return nil, fmt.Errorf("apiclient: compute queue limits: %w: %w", ErrMalformedResponse, err)
		}
		out = append(out, q)
	}
	return out, nil
}

// Name is the queue's name: queueName, else id (clients read either).
func (q Queue) Name() string { return strings.TrimSpace(cmp.Or(q.QueueName, q.ID)) }

// Limits is what a queue lets one job ask for. Zero means no limit known:
// the queue does not say, says "-1", "0" or "unlimit", or says something
// this client cannot read. Only a limit the queue states refuses a job.
type Limits struct {
	// MinNodes and MaxNodes bound the job's nodes (queMinNodect;
	// queMaxNodect, else the queue's node count queNodes).
	MinNodes, MaxNodes int
	// MaxPPN bounds the cores per node (queMaxPPN).
	MaxPPN int
	// MaxCores bounds the job's cores, nodes x ppn (queMaxNcpus).
	MaxCores int
	// MaxGPUsPerNode and MaxDCUsPerNode bound the accelerators per node
	// (queMaxGpuPN, queMaxDcuPN).
	MaxGPUsPerNode, MaxDCUsPerNode int
	// MaxWallTime bounds the wall time (queMaxWalltime, ParseWallTime).
	MaxWallTime time.Duration
}

// Limits reads the queue's limits. queMaxNgpus and queMaxNdcus (the
// queue's cards in all) are not read: whether GAP_NGPU counts per node or
// per job is not shown, and the per-node fields bound it either way.
func (q Queue) Limits() Limits {
	wall, _ := ParseWallTime(q.QueMaxWalltime)
	return Limits{
		MinNodes:       count(q.QueMinNodect),
		MaxNodes:       cmp.Or(count(q.QueMaxNodect), count(q.QueNodes)),
		MaxPPN:         count(q.QueMaxPPN),
		MaxCores:       count(q.QueMaxNcpus),
		MaxGPUsPerNode: count(q.QueMaxGpuPN),
		MaxDCUsPerNode: count(q.QueMaxDcuPN),
		MaxWallTime:    wall,
	}
}

// count reads a queue's count: a positive integer, else 0 (none known).
func count(v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// ParseWallTime reads a wall time as schedulers write it: HH:MM:SS (hours
// may pass 24), MM:SS, D-HH:MM:SS, D-HH:MM or D:HH:MM:SS. It reports
// false for anything else, a zero time, or a bare number (its unit is
// not shown: seconds in one scheduler script, minutes in Slurm).
func ParseWallTime(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	days := 0
	if d, rest, ok := strings.Cut(v, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || !strings.Contains(rest, ":") {
			return 0, false
		}
		days, v = n, rest+":00"
		if strings.Count(rest, ":") == 2 {
			v = rest
		}
	}
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 4 {
		return 0, false
	}
	if len(parts) == 4 {
		n, err := strconv.Atoi(parts[0])
		if err != nil || n < 0 || days > 0 {
			return 0, false
		}
		days, parts = n, parts[1:]
	}
	var total time.Duration
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || i > 0 && n > 59 {
			return 0, false
		}
		total = total*60 + time.Duration(n)
	}
	total = total*time.Second + time.Duration(days)*24*time.Hour
	return total, total > 0
}

// FormatWallTime writes d as HH:MM:SS, hours past 24 as they are.
func FormatWallTime(d time.Duration) string {
	s := int64(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}
