package jobclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/kvcas"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/tenants"
)

// tenantsBucket opens SLUICE_TENANTS; with create it creates the bucket
// when it is missing (an operator setting tenants before any worker
// started), otherwise a missing bucket is ErrNotSetUp.
func (c *Client) tenantsBucket(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	return c.bucket(ctx, contract.TenantsBucketConfig(contract.Options{}), create)
}

// bucket opens the bucket cfg defines; with create it creates it, as cfg
// says, when it is missing, otherwise a missing bucket is ErrNotSetUp.
func (c *Client) bucket(ctx context.Context, cfg jetstream.KeyValueConfig, create bool) (jetstream.KeyValue, error) {
	kv, err := c.js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !create {
			return nil, fmt.Errorf("%w (bucket %s does not exist)", ErrNotSetUp, cfg.Bucket)
		}
		kv, err = c.js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = c.js.KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("open bucket %s: %w", cfg.Bucket, err))
	}
	return kv, nil
}

// Tenants loads the SLUICE_TENANTS bucket into a View (docs/tenants.md).
// A bucket that does not exist yet gives an empty View.
func (c *Client) Tenants(ctx context.Context) (*tenants.View, error) {
	kv, err := c.tenantsBucket(ctx, false)
	if errors.Is(err, ErrNotSetUp) {
		return tenants.NewView(c.now), nil
	}
	if err != nil {
		return nil, err
	}
	// The watch stops once loaded: the CLI reads the bucket once.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v, err := tenants.Watch(wctx, kv, c.now, zerolog.Nop())
	if err != nil {
		return nil, c.jsErr(err)
	}
	return v, nil
}

// SetTenant applies change to tenant's settings (none yet: the zero
// Settings) and stores them if they are valid, by compare-and-set. An
// invalid result is returned as an error naming the field; nothing is
// written then.
func (c *Client) SetTenant(ctx context.Context, tenant string, change func(*tenants.Settings)) (tenants.Settings, error) {
	kv, err := c.tenantsBucket(ctx, true)
	if err != nil {
		return tenants.Settings{}, err
	}
	doc := kvcas.New(kvcas.Doc[tenants.Settings]{KV: kv, Conn: c.nc, Name: "tenant settings",
		WriteID: func(s *tenants.Settings) *string { return &s.WriteID }})
	e, err := doc.Update(ctx, tenants.TenantKey(tenant), nil, func(cur tenants.Settings, _ bool) (tenants.Settings, error) {
		change(&cur)
		return cur, cur.Validate()
	})
	return e.Value, c.jsErr(err)
}

// SetPrices merges rules into the price table and stores it, by
// compare-and-set, when every rule is valid under the model catalog cat
// (the one in force, see Catalog).
func (c *Client) SetPrices(ctx context.Context, rules map[string]float64, cat *models.Catalog) (tenants.Prices, error) {
	if err := (&tenants.Prices{Rules: rules}).Validate(cat); err != nil {
		return tenants.Prices{}, err
	}
	kv, err := c.tenantsBucket(ctx, true)
	if err != nil {
		return tenants.Prices{}, err
	}
	doc := kvcas.New(kvcas.Doc[tenants.Prices]{KV: kv, Conn: c.nc, Name: "prices",
		WriteID: func(p *tenants.Prices) *string { return &p.WriteID }})
	e, err := doc.Update(ctx, tenants.PricesKey, nil, func(cur tenants.Prices, _ bool) (tenants.Prices, error) {
		next := tenants.Prices{Rules: map[string]float64{}}
		for k, v := range cur.Rules {
			next.Rules[k] = v
		}
		for k, v := range rules {
			next.Rules[k] = v
		}
		return next, nil
	})
	return e.Value, c.jsErr(err)
}

// markScheduler writes the scheduler marker when one of subs names
// another tenant than default or another priority than 3, so that the
// workers turn fair scheduling on. It is best effort: a bucket that does
// not exist yet, or a marker that could not be written, is left to the
// workers, which write it when they meet such a job.
func (c *Client) markScheduler(ctx context.Context, subs []Submission) {
	if c.scheduler.Load() {
		return
	}
	for _, s := range subs {
		var spec struct {
			Tenant   string `json:"tenant"`
			Priority int    `json:"priority"`
		}
		if json.Unmarshal(s.Data, &spec) != nil {
			continue
		}
		if (spec.Tenant == "" || spec.Tenant == jobspec.DefaultTenant) && (spec.Priority == 0 || spec.Priority == jobspec.DefaultPriority) {
			continue
		}
		kv, err := c.tenantsBucket(ctx, false)
		if err == nil {
			// A user who may not write it (a team's) is refused at once.
			rctx, stop := c.refusable(ctx, kvSubject(contract.TenantsBucket, tenants.SchedulerKey))
			_ = tenants.MarkScheduler(rctx, kv, &c.scheduler)
			stop()
		}
		return
	}
}

// SpecTenant is the tenant a spec names ("" for none, or for a document
// that is not a JSON object).
func SpecTenant(data []byte) string {
	var spec struct {
		Tenant string `json:"tenant"`
	}
	if json.Unmarshal(data, &spec) != nil {
		return ""
	}
	return spec.Tenant
}

// BoundTenants gives each of subs without a Tenant whose tenant is bound
// that Tenant, so that it is published on the tenant's subject, the only
// one its workers accept it from. A spec naming no tenant is default's.
// It is best effort: a user who may not read SLUICE_TENANTS publishes on
// the kind's subject, and the workers decide (enqueue --as-tenant sets
// Tenant itself).
func (c *Client) BoundTenants(ctx context.Context, subs []Submission) {
	bound := map[string]bool{}
	var kv jetstream.KeyValue
	for i := range subs {
		if subs[i].Tenant != "" {
			continue
		}
		tenant := cmp.Or(SpecTenant(subs[i].Data), jobspec.DefaultTenant)
		if _, seen := bound[tenant]; !seen {
			if kv == nil {
				var err error
				if kv, err = c.tenantsBucket(ctx, false); err != nil {
					return
				}
			}
			bound[tenant] = tenantBound(ctx, kv, tenant)
		}
		if bound[tenant] {
			subs[i].Tenant = tenant
		}
	}
}

// tenantBound reads whether tenant is bound; false when that cannot be
// read.
func tenantBound(ctx context.Context, kv jetstream.KeyValue, tenant string) bool {
	e, err := kv.Get(ctx, tenants.TenantKey(tenant))
	if err != nil {
		return false
	}
	var s tenants.Settings
	return json.Unmarshal(e.Value(), &s) == nil && s.Bound
}

// LabelSpend is the cost of the jobs that ended with one value of a label.
type LabelSpend struct {
	Value   string  `json:"value"`
	Credits float64 `json:"credits"`
	Jobs    int     `json:"jobs"`
}

// SpendByLabel sums the cost of the terminal events stored in
// SLUICE_EVENTS since start, by the value of label key ("" for the jobs
// without it); events without a cost are left out. Events are kept
// SLUICE_EVENTS_MAX_AGE (7 days by default): what is older is not seen.
func (c *Client) SpendByLabel(ctx context.Context, key string, start time.Time) ([]LabelSpend, error) {
	var subjects []string
	for _, kind := range contract.Kinds {
		for _, status := range []string{"succeeded", "failed", "cancelled"} {
			subjects = append(subjects, contract.EventSubject(kind, status))
		}
	}
	sums := map[string]*LabelSpend{}
	err := c.scan(ctx, query{stream: contract.EventsStream, subjects: subjects, start: start}, func(m jetstream.Msg) bool {
		var ev events.Event
		if json.Unmarshal(m.Data(), &ev) != nil || ev.Data.Cost == nil {
			return true
		}
		v := ev.Data.Labels[key]
		s := sums[v]
		if s == nil {
			s = &LabelSpend{Value: v}
			sums[v] = s
		}
		s.Credits += *ev.Data.Cost
		s.Jobs++
		return true
	})
	if err != nil {
		return nil, err
	}
	out := make([]LabelSpend, 0, len(sums))
	for _, v := range slices.Sorted(maps.Keys(sums)) {
		out = append(out, *sums[v])
	}
	return out, nil
}

// Catalog returns the model catalog in force: the one a worker wrote into
// SLUICE_TENANTS at its start, or, when none has, the shipped one with
// found false.
func (c *Client) Catalog(ctx context.Context) (p *models.Published, found bool, err error) {
	shipped := &models.Published{Catalog: models.Shipped(), Source: models.SourceShipped}
	kv, err := c.tenantsBucket(ctx, false)
	if errors.Is(err, ErrNotSetUp) {
		return shipped, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	e, err := kv.Get(ctx, models.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return shipped, false, nil
	}
	if err != nil {
		return nil, false, c.jsErr(fmt.Errorf("read %s %s: %w", contract.TenantsBucket, models.Key, err))
	}
	p, err = models.DecodePublished(e.Value())
	if err != nil {
		return nil, false, err
	}
	return p, true, nil
}
