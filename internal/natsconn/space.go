package natsconn

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// noSpaceCodes are the JetStream errors of a write refused for lack of
// space (nats-server's errors.json): the account's resource limits
// (10002), the server's (10023 insufficient resources, 10047 storage,
// 10028 memory), and a stream's own limits (10077: a stream with discard
// policy "new" at its max_bytes or max_msgs; the same code also refuses a
// message larger than max_msg_size, which sluice's records and events
// never are).
var noSpaceCodes = []jetstream.ErrorCode{10002, 10023, 10028, 10047, 10077}

// NoSpace reports whether JetStream refused a write for lack of space: a
// stream, the account or the server is at its limit. Such a write succeeds
// unchanged once space returns.
func NoSpace(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && slices.Contains(noSpaceCodes, apiErr.ErrorCode)
}

// SpaceHeadroom is how much room a limit must have left not to count as
// reached: about the largest record or event sluice writes.
const SpaceHeadroom = 4 << 10

// Limit is a JetStream limit that is reached: Stream's (the account's when
// Stream is empty) Name ("max_bytes", "max_msgs", "max_storage") is Max
// and Used of it is used.
type Limit struct {
	Stream string
	Name   string
	Max    int64
	Used   int64
}

func (l Limit) String() string {
	who := "the account's JetStream"
	if l.Stream != "" {
		who = "stream " + l.Stream
	}
	return fmt.Sprintf("%s is at its %s (%d of %d)", who, l.Name, l.Used, l.Max)
}

// ReachedLimits returns the limits of the account and of streams that are
// reached (within SpaceHeadroom for bytes). A stream that does not exist
// is skipped. A server whose own store (its max_store or its filesystem)
// is full shows no reached limit here.
func ReachedLimits(ctx context.Context, js jetstream.JetStream, streams ...string) ([]Limit, error) {
	var out []Limit
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("account info: %w", err)
	}
	if max := ai.Limits.MaxStore; max > 0 && max-int64(ai.Store) < SpaceHeadroom {
		out = append(out, Limit{Name: "max_storage", Max: max, Used: int64(ai.Store)})
	}
	for _, name := range streams {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		out = append(out, streamLimits(s.CachedInfo())...)
	}
	return out, nil
}

// streamLimits are the limits info's stream has reached. Only a stream
// with discard policy "new" refuses writes at them; one with "old" drops
// its oldest messages instead.
func streamLimits(info *jetstream.StreamInfo) []Limit {
	cfg, st := info.Config, info.State
	if cfg.Discard != jetstream.DiscardNew {
		return nil
	}
	var out []Limit
	if cfg.MaxBytes > 0 && cfg.MaxBytes-int64(st.Bytes) < SpaceHeadroom {
		out = append(out, Limit{Stream: cfg.Name, Name: "max_bytes", Max: cfg.MaxBytes, Used: int64(st.Bytes)})
	}
	if cfg.MaxMsgs > 0 && int64(st.Msgs) >= cfg.MaxMsgs {
		out = append(out, Limit{Stream: cfg.Name, Name: "max_msgs", Max: cfg.MaxMsgs, Used: int64(st.Msgs)})
	}
	return out
}
