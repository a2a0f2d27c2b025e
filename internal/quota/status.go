package quota

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/natsconn"
)

// Read returns the fleet's quotas as the bucket holds them, one Status per
// resource with leases or a rate window on the board: leases in use across
// the fleet (expired ones aside), the limit the last writer configured,
// the jobs waiting and the requests claimed in the current window. A
// missing bucket (no worker has a fleet limit) reads as none. now is on
// the boards' clock (natsconn.Clock); zero reads the server's time (natsconn.ServerTime).
func Read(ctx context.Context, js jetstream.JetStream, now time.Time) ([]Status, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if now.IsZero() {
		if now, err = natsconn.ServerTime(ctx, kv); err != nil {
			if !errors.Is(err, natsconn.ErrNoServerTime) {
				return nil, err
			}
			now = time.Now()
		}
	}
	var out []Status
	for _, res := range Resources {
		st := Status{Resource: res}
		found := false
		if e, err := kv.Get(ctx, "leases."+res); err == nil {
			bd, derr := decodeBoard(e.Value())
			if derr == nil {
				v := bd.live(now.UnixMilli())
				st.Limit, st.InUse, st.Waiting = bd.Limit, len(v.Leases), v.waitingJobs()
				st.Effective = bd.effective(bd.Limit)
				found = true
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, err
		}
		if e, err := kv.Get(ctx, "rate."+res); err == nil {
			var w window
			if json.Unmarshal(e.Value(), &w) == nil {
				found, st.Rate = true, w.Rate
				if w.Win == now.Unix() || w.Win == now.Unix()-1 {
					st.RateUsed = w.Used
				}
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, err
		}
		if found {
			out = append(out, st)
		}
	}
	return out, nil
}
