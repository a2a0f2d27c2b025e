package natsconn

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// Publish sends m to the JetStream stream that holds its subject and
// waits for the stream's acknowledgement, like jetstream.JetStream's
// PublishMsg without options, and returns the stored message's sequence.
// It reads the usual acknowledgement, {"stream":...,"seq":N} possibly with
// "domain" and "duplicate", without encoding/json, whose decoding of every
// acknowledgement was about 2% of a busy worker's CPU (BENCHMARKS.md, "The
// cost of a job"); anything else is decoded as nats.go does.
//
// Errors are nats.go's: the stream's refusal as a *jetstream.APIError
// (so errors.Is(err, jetstream.ErrKeyExists) holds for a compare-and-set
// conflict, error code 10071, and is made to hold for 10164, the same
// conflict on a replicated stream), jetstream.ErrNoStreamResponse when no
// stream answered after nats.go's two retries 250 ms apart (as during a
// leader election), jetstream.ErrInvalidJSAck, or the request's own error
// (a timeout: ctx's deadline, or RequestTimeout when ctx has none, as
// nats.go bounds its own publish; Ambiguous holds for it).
func Publish(ctx context.Context, nc *nats.Conn, m *nats.Msg) (uint64, error) {
	parent := ctx
	ctx, cancel := Bounded(ctx)
	defer cancel()
	var resp *nats.Msg
	err := pubRetry.Do(ctx, func(ctx context.Context, _ int) error {
		var err error
		resp, err = nc.RequestMsgWithContext(ctx, m)
		if err != nil && !errors.Is(err, nats.ErrNoResponders) {
			return backoff.Permanent(err)
		}
		return err
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return 0, cmp.Or(parent.Err(), ctx.Err())
	case errors.Is(err, nats.ErrNoResponders):
		return 0, jetstream.ErrNoStreamResponse
	case err != nil:
		return 0, err
	}
	if seq, ok := quickAck(resp.Data); ok {
		return seq, nil
	}
	return slowAck(resp.Data)
}

// pubRetry spaces the requests of a publish nobody answered as nats.go's
// PublishMsg does: two retries 250 ms apart.
var pubRetry = backoff.Retry{
	Spacing: backoff.Exponential{Min: jetstream.DefaultPubRetryWait, Max: jetstream.DefaultPubRetryWait},
	Jitter:  backoff.JitterNone, Attempts: jetstream.DefaultPubRetryAttempts + 1,
}

// quickAck reads an acknowledgement of the form
// {"stream":"<name>","seq":<n>} with optional "domain" (a string) and
// "duplicate" (true or false) members, in any order, as nats-server writes
// it. Anything else (an error, another member, escapes, spaces) is left
// to slowAck.
func quickAck(b []byte) (seq uint64, ok bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return 0, false
	}
	b = b[1 : len(b)-1]
	var haveStream, haveSeq bool
	for len(b) > 0 {
		// "name":
		if b[0] != '"' {
			return 0, false
		}
		end := bytes.IndexByte(b[1:], '"')
		if end < 0 || len(b) < end+3 || b[end+2] != ':' {
			return 0, false
		}
		name := string(b[1 : end+1])
		b = b[end+3:]
		var val []byte
		if comma := bytes.IndexByte(b, ','); comma >= 0 {
			val, b = b[:comma], b[comma+1:]
		} else {
			val, b = b, nil
		}
		switch name {
		case "stream", "domain":
			if len(val) < 3 || val[0] != '"' || val[len(val)-1] != '"' || bytes.ContainsAny(val[1:len(val)-1], `"\`) {
				return 0, false
			}
			haveStream = haveStream || name == "stream"
		case "seq":
			n, err := strconv.ParseUint(string(val), 10, 64)
			if err != nil {
				return 0, false
			}
			seq, haveSeq = n, true
		case "duplicate":
			if s := string(val); s != "true" && s != "false" {
				return 0, false
			}
		default:
			return 0, false
		}
	}
	return seq, haveStream && haveSeq
}

// slowAck decodes an acknowledgement as nats.go's PublishMsg does.
func slowAck(b []byte) (uint64, error) {
	var ack struct {
		Error  *jetstream.APIError `json:"error,omitempty"`
		Stream string              `json:"stream"`
		Seq    uint64              `json:"seq"`
	}
	if err := json.Unmarshal(b, &ack); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if ack.Error != nil {
		if ack.Error.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || ack.Error.ErrorCode == errCodeWrongLastSequenceReplicated {
			return 0, fmt.Errorf("nats: %w: %w", ack.Error, jetstream.ErrKeyExists)
		}
		return 0, fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" {
		return 0, jetstream.ErrInvalidJSAck
	}
	return ack.Seq, nil
}

// errCodeWrongLastSequenceReplicated is the error code of a
// compare-and-set conflict on a replicated stream (nats-server 2.12).
const errCodeWrongLastSequenceReplicated jetstream.ErrorCode = 10164
