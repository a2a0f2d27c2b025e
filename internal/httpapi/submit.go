package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

// maxSpecBytes is the contract's largest spec; the body is read up to one
// byte more, so that jobspec names the limit as it does for the CLI.
const maxSpecBytes = 1 << 20

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// accepted is the answer of a submit and a retry.
type accepted struct {
	JobID     string `json:"job_id"`
	Status    string `json:"status"`
	Duplicate bool   `json:"duplicate"`
	Links     links  `json:"links"`
}

// links are a job's URLs.
type links struct {
	Self   string `json:"self"`
	Events string `json:"events"`
	Cancel string `json:"cancel"`
	Retry  string `json:"retry"`
}

func jobLinks(id string) links {
	self := "/v1/jobs/" + id
	return links{Self: self, Events: self + "/events", Cancel: self + "/cancel", Retry: self + "/retry"}
}

// submit publishes a spec for key's tenant: 422 for a spec that breaks a
// rule (the CLI's message), 403 for one the key may not submit, 409 for an
// id another tenant has, else 202 with the job, the same job when the
// spec's id or the Idempotency-Key was seen before.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, key *apikeys.Key) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxSpecBytes+1))
	if err != nil {
		writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: codeBadParameter, Detail: "body: " + err.Error()})
		return
	}
	idem := r.Header.Get("Idempotency-Key")
	if len(idem) > maxIdempotencyKey {
		writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: codeBadParameter,
			Detail: fmt.Sprintf("Idempotency-Key: at most %d bytes, got %d", maxIdempotencyKey, len(idem))})
		return
	}
	ctx := r.Context()
	sub, err := jobclient.NewSubmission(data, s.idempotentIDs(ctx, key, idem), s.cfg.Catalog)
	var je *jobspec.Error
	if errors.As(err, &je) {
		writeProblem(w, r, invalidSpec(je))
		return
	}
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	if p, refused := refuse(key, sub); refused {
		writeProblem(w, r, p)
		return
	}
	res, err := s.publish(ctx, key, sub)
	switch {
	case errors.Is(err, apikeys.ErrOwnedElsewhere):
		writeProblem(w, r, problem{Status: http.StatusConflict, Code: codeIDTaken,
			Detail: fmt.Sprintf("id: %s is another job's; choose another id", sub.ID)})
	case err != nil:
		s.unavailable(w, r, err)
	default:
		w.Header().Set("Location", res.Links.Self)
		writeJSON(w, http.StatusAccepted, res)
	}
}

// idempotentIDs makes the id of a spec without one: with an
// Idempotency-Key, the id the key's tenant first used it for.
func (s *Server) idempotentIDs(ctx context.Context, key *apikeys.Key, idem string) jobclient.IDFunc {
	if idem == "" {
		return s.cfg.NewID
	}
	return func(kind string) (string, error) {
		id, err := s.cfg.NewID(kind)
		if err != nil {
			return "", err
		}
		return s.cfg.Keys.Idempotent(ctx, key.Tenant, idem, id)
	}
}

// publish claims sub's id for key's tenant and publishes it on the
// tenant's subject, unless a claim of the same tenant says it was
// published already. The claim comes first: a process that dies before
// the publish leaves a claim without Published, and the repeated request
// publishes then (SLUICE_JOBS deduplicates by id).
func (s *Server) publish(ctx context.Context, key *apikeys.Key, sub jobclient.Submission) (*accepted, error) {
	owner, existed, err := s.cfg.Keys.Claim(ctx, sub.ID, key.Tenant, key.ID)
	if err != nil {
		return nil, err
	}
	res := &accepted{JobID: sub.ID, Status: jobclient.StatusQueued, Duplicate: existed, Links: jobLinks(sub.ID)}
	if existed && owner.Published {
		if job, err := s.cfg.Client.Status(ctx, sub.ID); err == nil {
			res.Status = job.Status
		}
		return res, nil
	}
	if sub.Data, err = withTenant(sub.Data, key.Tenant); err != nil {
		return nil, err
	}
	// The tenant's subject: the job counts as the tenant's, bound or not
	// (contract section 9).
	sub.Tenant = key.Tenant
	pub, err := s.cfg.Client.Publish(ctx, []jobclient.Submission{sub}, jobclient.PublishOptions{AckTimeout: 10 * time.Second})
	if err == nil {
		err = pub.Jobs[0].Err
	}
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", sub.ID, err)
	}
	res.Duplicate = res.Duplicate || pub.Jobs[0].Duplicate
	if pub.Jobs[0].Duplicate && !owner.Published {
		if err := s.ownSpec(ctx, key, sub.ID, owner); err != nil {
			return nil, err
		}
	}
	if err := s.cfg.Keys.MarkPublished(ctx, sub.ID, owner); err != nil {
		// The job is queued; a repeated submit only publishes it again,
		// which the stream deduplicates.
		s.cfg.Logger.Warn().Err(err).Str("job_id", sub.ID).Msg("api: job published, its owner not marked")
	}
	return res, nil
}

// ownSpec checks, when the stream knew id before this claim was marked
// published, that the job it knew is key's tenant's (a concurrent
// identical POST) and not a job published on NATS for another tenant:
// that one keeps its id, the claim is released and the answer is
// ErrOwnedElsewhere, so the key can neither read nor cancel it.
func (s *Server) ownSpec(ctx context.Context, key *apikeys.Key, id string, owner apikeys.Owner) error {
	var spec struct {
		Tenant string `json:"tenant"`
	}
	data, err := s.cfg.Client.Spec(ctx, id)
	if errors.Is(err, jobclient.ErrSpecGone) {
		return nil // no job left to read or cancel: the claim stands
	}
	if err != nil {
		return err
	}
	if json.Unmarshal(data, &spec) == nil && spec.Tenant == key.Tenant {
		return nil
	}
	if err := s.cfg.Keys.Release(ctx, id, owner); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", apikeys.ErrOwnedElsewhere, id)
}

// head is what the API checks of a valid spec beyond jobspec's rules.
type head struct {
	Tenant   *string `json:"tenant"`
	Priority *int    `json:"priority"`
	Pipeline *struct {
		Steps []struct {
			Spec struct {
				Kind     string  `json:"kind"`
				Tenant   *string `json:"tenant"`
				Priority *int    `json:"priority"`
			} `json:"spec"`
		} `json:"steps"`
	} `json:"pipeline"`
}

// defaultPriority is a spec's priority when it names none.
const defaultPriority = 3

// refuse checks a valid spec against key: a tenant other than the key's
// is invalid_spec (as on a tenant subject); a kind the key may not submit
// or a priority more urgent than it may ask is tenant_refused. A
// pipeline's steps are checked the same way, each step inheriting the
// pipeline's tenant and priority.
func refuse(key *apikeys.Key, sub jobclient.Submission) (problem, bool) {
	var h head
	if err := json.Unmarshal(sub.Data, &h); err != nil {
		return problem{Status: http.StatusUnprocessableEntity, Code: codeInvalidSpec, Detail: err.Error()}, true
	}
	check := func(path, kind string, tenant *string, priority *int) (problem, bool) {
		switch {
		case tenant != nil && *tenant != key.Tenant:
			return problem{Status: http.StatusUnprocessableEntity, Code: codeInvalidSpec,
				Detail: fmt.Sprintf("%stenant: must be the key's tenant %q or absent, got %q", path, key.Tenant, *tenant)}, true
		case !key.AllowsKind(kind):
			return problem{Status: http.StatusForbidden, Code: codeTenantRefused,
				Detail: fmt.Sprintf("%skind: key %s may submit only %v, not %s", path, key.ID, key.Kinds, kind)}, true
		case key.MaxPriority > 0 && cmp.Or(ptr(priority), defaultPriority) < key.MaxPriority:
			return problem{Status: http.StatusForbidden, Code: codeTenantRefused,
				Detail: fmt.Sprintf("%spriority: key %s may ask priority %d or less urgent, got %d", path, key.ID, key.MaxPriority, cmp.Or(ptr(priority), defaultPriority))}, true
		}
		return problem{}, false
	}
	if p, bad := check("", string(sub.Kind), h.Tenant, h.Priority); bad {
		return p, true
	}
	if h.Pipeline == nil {
		return problem{}, false
	}
	for i, st := range h.Pipeline.Steps {
		path := fmt.Sprintf("pipeline.steps[%d].spec.", i)
		if p, bad := check(path, st.Spec.Kind, st.Spec.Tenant, cmp.Or(st.Spec.Priority, h.Priority)); bad {
			return p, true
		}
	}
	return problem{}, false
}

func ptr(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// withTenant writes the key's tenant into a spec that names none, so the
// job is the tenant's wherever it is read (its events, its record).
func withTenant(data []byte, tenant string) ([]byte, error) {
	var h struct {
		Tenant *string `json:"tenant"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, err
	}
	if h.Tenant != nil {
		return data, nil
	}
	return jobclient.InsertMember(data, "tenant", tenant)
}
