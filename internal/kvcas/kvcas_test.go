package kvcas_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/kvcas"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// counter is a value as the users store theirs: a count and the id of the
// write that stored it.
type counter struct {
	N       int    `json:"n"`
	WriteID string `json:"write_id,omitempty"`
}

func writeID(c *counter) *string { return &c.WriteID }

func put(t *testing.T, kv jetstream.KeyValue, key string, n int) uint64 {
	t.Helper()
	b, _ := json.Marshal(counter{N: n})
	rev, err := kv.Put(context.Background(), key, b)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func stored(t *testing.T, kv jetstream.KeyValue, key string) (counter, uint64) {
	t.Helper()
	e, err := kv.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var c counter
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		t.Fatal(err)
	}
	return c, e.Revision()
}

var errRefused = errors.New("refused")

// TestUpdate runs Update against an embedded server, each case on a key
// of its own, and counts at the server the reads and writes it sent: the
// common path costs one read and one write, and a known value one write.
func TestUpdate(t *testing.T) {
	f := newUpdateFixture(t)
	for i, tt := range slices.Concat(f.writeCases(), f.conflictCases(), f.refusalCases()) {
		t.Run(tt.name, func(t *testing.T) { f.run(t, "k."+strconv.Itoa(i), tt) })
	}
}

// updateFixture is TestUpdate's bucket, with a tap counting the
// operations each case sends.
type updateFixture struct {
	n   *testenv.NATS
	ctx context.Context
	kv  jetstream.KeyValue
	tap *testenv.OpTap
}

func newUpdateFixture(t *testing.T) *updateFixture {
	f := &updateFixture{n: testenv.StartNATS(t), ctx: testenv.Context(t, time.Minute)}
	var err error
	f.kv, err = f.n.JS.CreateKeyValue(f.ctx, jetstream.KeyValueConfig{Bucket: "CAS_TEST", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.tap = testenv.StartOpTap(t, f.n.URL)
	return f
}

// updateEnv is how a case calls Update.
type updateEnv struct {
	doc   *kvcas.Doc[counter]
	known *kvcas.Entry[counter]
	// change, when set, replaces an increment; calls counts its calls.
	change func(calls int, c counter, found bool) (counter, error)
}

// updateCase is one case of TestUpdate.
type updateCase struct {
	name string
	// setup prepares key and returns how Update is called.
	setup     func(t *testing.T, key string) updateEnv
	wantN     int
	wantErr   error
	wantCalls int
	wantOps   map[string]int
}

// writeCases write without meeting another writer.
func (f *updateFixture) writeCases() []updateCase {
	kv := f.kv
	return []updateCase{
		{
			name: "creates an absent key",
			setup: func(t *testing.T, key string) updateEnv {
				return updateEnv{change: func(_ int, c counter, found bool) (counter, error) {
					if found {
						return c, errors.New("found a value that was never written")
					}
					return counter{N: 1}, nil
				}}
			},
			wantN: 1, wantCalls: 1, wantOps: map[string]int{"get CAS_TEST": 1, "kv CAS_TEST create": 1},
		},
		{
			name:  "updates a present key",
			setup: func(t *testing.T, key string) updateEnv { put(t, kv, key, 5); return updateEnv{} },
			wantN: 6, wantCalls: 1, wantOps: map[string]int{"get CAS_TEST": 1, "kv CAS_TEST update": 1},
		},
		{
			name: "writes from a known revision without reading",
			setup: func(t *testing.T, key string) updateEnv {
				rev := put(t, kv, key, 5)
				return updateEnv{known: &kvcas.Entry[counter]{Value: counter{N: 5}, Revision: rev}}
			},
			wantN: 6, wantCalls: 1, wantOps: map[string]int{"kv CAS_TEST update": 1},
		},
		{
			name:  "a known revision 0 creates",
			setup: func(t *testing.T, key string) updateEnv { return updateEnv{known: &kvcas.Entry[counter]{}} },
			wantN: 1, wantCalls: 1, wantOps: map[string]int{"kv CAS_TEST create": 1},
		},
	}
}

// conflictCases meet another writer, or a replica behind.
func (f *updateFixture) conflictCases() []updateCase {
	kv, ctx, n := f.kv, f.ctx, f.n
	return []updateCase{
		{
			name: "a conflict applies the change again to the current value",
			setup: func(t *testing.T, key string) updateEnv {
				put(t, kv, key, 1)
				return updateEnv{change: func(calls int, c counter, _ bool) (counter, error) {
					if calls == 1 {
						put(t, kv, key, 10) // another writer, between the read and the write
					}
					c.N++
					return c, nil
				}}
			},
			wantN: 11, wantCalls: 2,
			wantOps: map[string]int{"get CAS_TEST": 2, "kv CAS_TEST update": 2, "kv CAS_TEST put": 1},
		},
		{
			name: "a stale known revision meets a conflict and reads",
			setup: func(t *testing.T, key string) updateEnv {
				rev := put(t, kv, key, 1)
				put(t, kv, key, 7)
				return updateEnv{known: &kvcas.Entry[counter]{Value: counter{N: 1}, Revision: rev}}
			},
			wantN: 8, wantCalls: 2, wantOps: map[string]int{"get CAS_TEST": 1, "kv CAS_TEST update": 2},
		},
		{
			name: "after a conflict the read goes to the leader",
			setup: func(t *testing.T, key string) updateEnv {
				put(t, kv, key, 1)
				behind := testenv.Behind(kv)
				if _, err := behind.Get(ctx, key); err != nil {
					t.Fatal(err)
				}
				put(t, kv, key, 3) // a write the replica behind never shows
				return updateEnv{doc: kvcas.New(kvcas.Doc[counter]{KV: behind, Conn: n.Conn, WriteID: writeID})}
			},
			wantN: 4, wantCalls: 2,
			// The first read is the replica's, from its cache; the second
			// the leader's.
			wantOps: map[string]int{"get CAS_TEST": 1, "kv CAS_TEST update": 2},
		},
		{
			name: "without the leader a replica behind fails every attempt",
			setup: func(t *testing.T, key string) updateEnv {
				put(t, kv, key, 1)
				behind := testenv.Behind(kv)
				if _, err := behind.Get(ctx, key); err != nil {
					t.Fatal(err)
				}
				put(t, kv, key, 3)
				return updateEnv{doc: kvcas.New(kvcas.Doc[counter]{KV: behind, WriteID: writeID, Conflicts: 2})}
			},
			wantN: 3, wantErr: kvcas.ErrConflict, wantCalls: 3, wantOps: map[string]int{"kv CAS_TEST update": 3},
		},
	}
}

// refusalCases have a change that refuses or changes nothing.
func (f *updateFixture) refusalCases() []updateCase {
	kv := f.kv
	return []updateCase{
		{
			name: "the change refuses: nothing is written",
			setup: func(t *testing.T, key string) updateEnv {
				put(t, kv, key, 2)
				return updateEnv{change: func(int, counter, bool) (counter, error) { return counter{}, errRefused }}
			},
			wantN: 2, wantErr: errRefused, wantCalls: 1, wantOps: map[string]int{"get CAS_TEST": 1},
		},
		{
			name: "the change leaves the value unchanged: nothing is written",
			setup: func(t *testing.T, key string) updateEnv {
				put(t, kv, key, 2)
				return updateEnv{change: func(_ int, c counter, _ bool) (counter, error) { return c, kvcas.Unchanged }}
			},
			wantN: 2, wantCalls: 1, wantOps: map[string]int{"get CAS_TEST": 1},
		},
		{
			name: "a refusal of a known value is asked again of the stored one",
			setup: func(t *testing.T, key string) updateEnv {
				rev := put(t, kv, key, 2)
				put(t, kv, key, 4)
				return updateEnv{
					known: &kvcas.Entry[counter]{Value: counter{N: 2}, Revision: rev},
					change: func(_ int, c counter, _ bool) (counter, error) {
						if c.N < 3 {
							return c, kvcas.Unchanged
						}
						c.N++
						return c, nil
					},
				}
			},
			wantN: 5, wantCalls: 2, wantOps: map[string]int{"get CAS_TEST": 1, "kv CAS_TEST update": 1},
		},
	}
}

// run runs tt on key.
func (f *updateFixture) run(t *testing.T, key string, tt updateCase) {
	e := tt.setup(t, key)
	doc := e.doc
	if doc == nil {
		doc = kvcas.New(kvcas.Doc[counter]{KV: f.kv, Conn: f.n.Conn, WriteID: writeID})
	}
	calls := 0
	change := func(c counter, found bool) (counter, error) {
		calls++
		if e.change != nil {
			return e.change(calls, c, found)
		}
		c.N++
		return c, nil
	}
	f.tap.Reset()
	got, err := doc.Update(f.ctx, key, e.known, change)
	ops := f.tap.Counts()
	if tt.wantErr == nil && err != nil || !errors.Is(err, tt.wantErr) {
		t.Fatalf("err = %v, want %v", err, tt.wantErr)
	}
	if calls != tt.wantCalls {
		t.Errorf("change called %d times, want %d", calls, tt.wantCalls)
	}
	c, rev := stored(t, f.kv, key)
	if c.N != tt.wantN {
		t.Errorf("stored %d, want %d", c.N, tt.wantN)
	}
	if err == nil && (got.Value.N != c.N || got.Revision != rev) {
		t.Errorf("returned %d at %d, stored %d at %d", got.Value.N, got.Revision, c.N, rev)
	}
	if !maps.Equal(ops, tt.wantOps) {
		t.Errorf("operations %v, want %v", ops, tt.wantOps)
	}
}

// TestUpdateRecognisesItsWriteAfterALostAnswer writes through a proxy that
// drops the server's answer to the write, as a leader change can: the
// write is stored, the writer hears nothing. Update reads again, knows its
// write by its id and returns it; the change is applied once.
func TestUpdateRecognisesItsWriteAfterALostAnswer(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	drop, djs, kv := droppingBucket(ctx, t)
	doc := kvcas.New(kvcas.Doc[counter]{KV: kv, Conn: djs.Conn(), WriteID: writeID, Timeout: 300 * time.Millisecond})
	for _, create := range []bool{true, false} {
		before := 0
		if !create {
			before, _ = func() (int, uint64) { c, r := stored(t, kv, "k"); return c.N, r }()
		}
		calls := 0
		drop.Arm("$KV.CAS_TEST.", 1)
		got, err := doc.Update(ctx, "k", nil, func(c counter, _ bool) (counter, error) { calls++; c.N++; return c, nil })
		if err != nil {
			t.Fatalf("create %v: %v", create, err)
		}
		c, rev := stored(t, kv, "k")
		if calls != 1 || c.N != before+1 || got.Value.WriteID != c.WriteID || got.Revision != rev {
			t.Errorf("create %v: change called %d times, stored %+v at %d, returned %+v at %d; want one call and the stored write",
				create, calls, c, rev, got.Value, got.Revision)
		}
	}
	if d := drop.Dropped(); d != 2 {
		t.Fatalf("%d answers dropped, want 2", d)
	}
}

// TestUpdateCounts checks what Count hears: each read and each write with
// its outcome, a conflict and a lost answer among them, so that a metric
// built on it counts what the server saw.
func TestUpdateCounts(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	drop, djs, kv := droppingBucket(ctx, t)
	got := map[string]int{}
	doc := kvcas.New(kvcas.Doc[counter]{KV: kv, Conn: djs.Conn(), WriteID: writeID, Timeout: 300 * time.Millisecond,
		Count: func(key, op, outcome string) { got[key+" "+op+" "+outcome]++ }})
	inc := func(c counter, _ bool) (counter, error) { c.N++; return c, nil }
	if _, err := doc.Update(ctx, "k", nil, inc); err != nil { // absent: read, create
		t.Fatal(err)
	}
	calls := 0
	if _, err := doc.Update(ctx, "k", nil, func(c counter, found bool) (counter, error) {
		if calls++; calls == 1 {
			put(t, kv, "k", 10) // another writer between the read and the write
		}
		return inc(c, found)
	}); err != nil {
		t.Fatal(err)
	}
	drop.Arm("$KV.CAS_TEST.", 1)
	if _, err := doc.Update(ctx, "k", nil, inc); err != nil { // the answer lost, the write stored
		t.Fatal(err)
	}
	want := map[string]int{
		"k read absent": 1, "k read ok": 4,
		"k write ok": 2, "k write conflict": 1, "k write lost": 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
}

// droppingBucket makes bucket CAS_TEST on a fresh server and returns it as
// seen through a proxy that can drop the server's answers.
func droppingBucket(ctx context.Context, t *testing.T) (*testenv.ReplyDropper, jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	n := testenv.StartNATS(t)
	if _, err := n.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "CAS_TEST", History: 1}); err != nil {
		t.Fatal(err)
	}
	drop := testenv.StartReplyDropper(t, strings.TrimPrefix(n.Server.ClientURL(), "nats://"))
	djs := drop.JetStream(t)
	kv, err := djs.KeyValue(ctx, "CAS_TEST")
	if err != nil {
		t.Fatal(err)
	}
	return drop, djs, kv
}
