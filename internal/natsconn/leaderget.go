package natsconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// KVGetFromLeader reads key of the key-value bucket from the leader of the
// bucket's stream, with the JetStream API's STREAM.MSG.GET request, and
// returns its value and revision, or an error matching
// jetstream.ErrKeyNotFound when the key has none (never written, deleted
// or purged). Its wait is bounded (Bounded) whatever ctx.
//
// A bucket's Get is a direct get, which any replica may answer: on a
// cluster a replica that has not applied the latest writes yet (a
// follower catching up after a restart, or lagging under load) answers
// with an older value, and a client's requests keep going to the replica
// on the server it is connected to. A compare-and-set loop whose reads
// keep coming from such a replica keeps failing; reading the leader after
// a conflict gives the next write the revision it must name.
func KVGetFromLeader(ctx context.Context, nc *nats.Conn, bucket, key string) (value []byte, revision uint64, err error) {
	stream, subject := "KV_"+bucket, "$KV."+bucket+"."+key
	fail := func(err error) ([]byte, uint64, error) {
		return nil, 0, fmt.Errorf("read %s from the leader of %s: %w", subject, stream, err)
	}
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return fail(err)
	}
	rctx, cancel := Bounded(ctx)
	defer cancel()
	reply, err := nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return fail(err)
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
		Msg   *struct {
			Seq    uint64 `json:"seq"`
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return fail(err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return fail(jetstream.ErrKeyNotFound)
	case resp.Error != nil:
		return fail(resp.Error)
	case resp.Msg == nil:
		return fail(errors.New("an answer without a message"))
	}
	if len(resp.Msg.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Msg.Header)
		if err != nil {
			return fail(fmt.Errorf("headers: %w", err))
		}
		switch h.Get("KV-Operation") {
		case "DEL", "PURGE":
			return fail(jetstream.ErrKeyNotFound)
		}
	}
	return resp.Msg.Data, resp.Msg.Seq, nil
}

// KVRead reads key of kv: from the leader of the bucket's stream
// (KVGetFromLeader) when fromLeader is set and nc, kv's connection, is
// known, as after a write lost to a conflict; else, or when no leader
// answers within leaderReadWait (an election), by kv's Get, from any
// replica, so that the caller goes on as it did before it asked the
// leader (its write then meets the election, which it knows how to wait
// out).
func KVRead(ctx context.Context, kv jetstream.KeyValue, nc *nats.Conn, key string, fromLeader bool) ([]byte, uint64, error) {
	if fromLeader && nc != nil {
		lctx, cancel := context.WithTimeout(ctx, leaderReadWait)
		value, rev, err := KVGetFromLeader(lctx, nc, kv.Bucket(), key)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) || ctx.Err() != nil {
			return value, rev, err
		}
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

// leaderReadWait bounds KVRead's wait for the leader's answer.
const leaderReadWait = 2 * time.Second
