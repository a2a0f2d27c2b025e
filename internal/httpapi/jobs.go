package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// jobBody is a job as the API shows it: the CLI's view of it, with links
// and each artifact's presigned link.
type jobBody struct {
	jobclient.Job
	Artifacts []artifact `json:"artifacts"`
	Links     links      `json:"links"`
}

// artifact is an artifact with a GET URL valid until ExpiresAt.
type artifact struct {
	state.Artifact
	DownloadURL string     `json:"download_url,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

// errNotFound answers both a job that does not exist and another
// tenant's: a key learns nothing of other tenants' ids.
var errNotFound = errors.New("no such job")

// owned returns job id when it is key's tenant's: by its record's (or
// event's) tenant, or, while no worker has written one, by the claim the
// API made when it published it.
func (s *Server) owned(ctx context.Context, key *apikeys.Key, id string) (*jobclient.Job, error) {
	if !jobspec.ValidID(id) {
		return nil, errNotFound
	}
	job, err := s.cfg.Client.Status(ctx, id)
	if errors.Is(err, jobclient.ErrNoSuchJob) || errors.Is(err, jobclient.ErrNotSetUp) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	tenant := job.Tenant
	if tenant == "" {
		owner, err := s.cfg.Keys.OwnerOf(ctx, id)
		if err != nil {
			return nil, err
		}
		if owner != nil {
			tenant = owner.Tenant
		}
	}
	if tenant != key.Tenant {
		return nil, errNotFound
	}
	return job, nil
}

// ownedOrAnswer is owned, answering 404 or 503 itself; nil then.
func (s *Server) ownedOrAnswer(w http.ResponseWriter, r *http.Request, key *apikeys.Key) *jobclient.Job {
	id := r.PathValue("id")
	job, err := s.owned(r.Context(), key, id)
	switch {
	case errors.Is(err, errNotFound):
		writeProblem(w, r, problem{Status: http.StatusNotFound, Code: codeNoSuchJob, Detail: "no such job: " + id})
		return nil
	case err != nil:
		s.unavailable(w, r, err)
		return nil
	}
	return job
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, key *apikeys.Key) {
	job := s.ownedOrAnswer(w, r, key)
	if job == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.body(r.Context(), job))
}

// body adds links and presigned artifact links to job. An artifact that
// cannot be signed is listed without a link.
func (s *Server) body(ctx context.Context, job *jobclient.Job) jobBody {
	b := jobBody{Job: *job, Artifacts: make([]artifact, 0, len(job.Artifacts)), Links: jobLinks(job.ID)}
	expires := s.cfg.Now().Add(s.cfg.PresignTTL).UTC()
	for _, a := range job.Artifacts {
		out := artifact{Artifact: a}
		if s.cfg.Presigner != nil {
			if u, err := s.cfg.Presigner.Presign(ctx, a.Bucket, a.Key, s.cfg.PresignTTL); err == nil {
				out.DownloadURL, out.ExpiresAt = u, &expires
			}
		}
		b.Artifacts = append(b.Artifacts, out)
	}
	return b
}

// jobPage is a page of GET /v1/jobs.
type jobPage struct {
	Jobs       []jobBody `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// maxPage bounds a page of GET /v1/jobs, maxOffset how far its cursor
// goes (ListJobs reads the jobs before the page too).
const (
	maxPage   = 200
	maxOffset = 10000
)

func (s *Server) list(w http.ResponseWriter, r *http.Request, key *apikeys.Key) {
	o, offset, limit, err := listOptions(r)
	if err != nil {
		writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: codeBadParameter, Detail: err.Error()})
		return
	}
	o.Tenant, o.Limit = key.Tenant, offset+limit+1
	got, err := s.cfg.Client.ListJobs(r.Context(), o)
	if errors.Is(err, jobclient.ErrNotSetUp) {
		got, err = &jobclient.JobList{}, nil
	}
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	page := jobPage{Jobs: []jobBody{}}
	for i := offset; i < len(got.Jobs) && i < offset+limit; i++ {
		page.Jobs = append(page.Jobs, s.body(r.Context(), &got.Jobs[i]))
	}
	if len(got.Jobs) > offset+limit {
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte("o" + strconv.Itoa(offset+limit)))
	}
	writeJSON(w, http.StatusOK, page)
}

// listOptions reads GET /v1/jobs's query: status, kind, label (key=value,
// repeatable), limit (1-200, default 50) and the opaque cursor of the
// previous page.
func listOptions(r *http.Request) (o jobclient.ListOptions, offset, limit int, err error) {
	q := r.URL.Query()
	o.Status, o.Kind = q.Get("status"), jobspec.Kind(q.Get("kind"))
	if o.Status != "" && !slices.Contains(jobclient.ListStatuses, o.Status) {
		return o, 0, 0, fmt.Errorf("status: want one of %s, got %q", strings.Join(jobclient.ListStatuses, ", "), o.Status)
	}
	if o.Kind != "" && !o.Kind.Valid() {
		return o, 0, 0, fmt.Errorf("kind: want video, speech, compute, container or pipeline, got %q", o.Kind)
	}
	for _, l := range q["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return o, 0, 0, fmt.Errorf("label: want key=value, got %q", l)
		}
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[k] = v
	}
	limit = 50
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxPage {
			return o, 0, 0, fmt.Errorf("limit: want an integer in [1, %d], got %q", maxPage, v)
		}
	}
	if c := q.Get("cursor"); c != "" {
		raw, err := base64.RawURLEncoding.DecodeString(c)
		n, cerr := strconv.Atoi(strings.TrimPrefix(string(raw), "o"))
		if err != nil || cerr != nil || !strings.HasPrefix(string(raw), "o") || n < 0 || n > maxOffset {
			return o, 0, 0, fmt.Errorf("cursor: not a cursor this API gave, got %q", c)
		}
		offset = n
	}
	return o, offset, limit, nil
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, key *apikeys.Key) {
	job := s.ownedOrAnswer(w, r, key)
	if job == nil {
		return
	}
	res, err := s.cfg.Client.Cancel(r.Context(), job.ID, jobclient.CancelOptions{})
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

func (s *Server) retry(w http.ResponseWriter, r *http.Request, key *apikeys.Key) {
	job := s.ownedOrAnswer(w, r, key)
	if job == nil {
		return
	}
	force := r.URL.Query().Get("force") == "true"
	res, err := s.cfg.Client.Retry(r.Context(), job.ID, jobclient.RetryOptions{
		Force: force,
		// The retry's spec names the key's tenant (submit wrote it in).
		AsTenant: true,
	})
	if errors.Is(err, jobclient.ErrNotRetryable) {
		writeProblem(w, r, problem{Status: http.StatusConflict, Code: codeNotRetryable, Detail: err.Error()})
		return
	}
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	// The retry's spec names the tenant; the claim covers it until a
	// worker records it. An id another tenant took first (a job of that
	// id was published instead of the retry) is said, not hidden.
	owner, _, err := s.cfg.Keys.Claim(r.Context(), res.RetryID, key.Tenant, key.ID)
	if errors.Is(err, apikeys.ErrOwnedElsewhere) {
		writeProblem(w, r, problem{Status: http.StatusConflict, Code: codeIDTaken,
			Detail: fmt.Sprintf("the retry's id %s is another job's; repeat the retry once that job has ended", res.RetryID)})
		return
	}
	if err == nil {
		_ = s.cfg.Keys.MarkPublished(r.Context(), res.RetryID, owner)
	}
	out := accepted{JobID: res.RetryID, Status: jobclient.StatusQueued, Duplicate: res.Duplicate, Links: jobLinks(res.RetryID)}
	w.Header().Set("Location", out.Links.Self)
	writeJSON(w, http.StatusAccepted, out)
}
