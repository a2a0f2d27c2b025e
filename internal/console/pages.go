package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/tenants"
)

// page is what every template gets.
type page struct {
	Title    string
	Nav      string
	Path     string
	Msg, Err string
	// Actions: a token is set; LoggedIn: this browser may act.
	Actions, LoggedIn bool
	// After is the position of SLUICE_EVENTS before the page read
	// anything, for its script to start the live stream from; "" when
	// unknown (the stream then sends only new events).
	After string
	Data  any
}

func (c *Console) newPage(r *http.Request, title, nav string, data any) page {
	after, _ := r.Context().Value(afterKey{}).(string)
	return page{
		Title: title, Nav: nav, Path: r.URL.RequestURI(),
		Msg: r.URL.Query().Get("msg"), Err: r.URL.Query().Get("error"),
		Actions: c.cfg.Token != "", LoggedIn: c.loggedIn(r), After: after, Data: data,
	}
}

type afterKey struct{}

// marked notes the position of SLUICE_EVENTS before h reads anything, for
// the page it renders: its live stream starts there, so no event published
// while the page is made or before the browser connects is missed.
func (c *Console) marked(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if seq, err := c.cfg.Client.EventsPosition(r.Context()); err == nil {
			r = r.WithContext(context.WithValue(r.Context(), afterKey{}, strconv.FormatUint(seq, 10)))
		}
		h(w, r)
	}
}

func (c *Console) render(w http.ResponseWriter, name string, p page) {
	var b bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&b, "layout.html", p); err != nil {
		c.log.Error().Err(err).Str("page", name).Msg("console template")
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// fail shows an error the operator can act on.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, jobclient.ErrNoSuchJob):
		code = http.StatusNotFound
	case errors.Is(err, jobclient.ErrNotSetUp):
		code = http.StatusServiceUnavailable
	}
	w.WriteHeader(code)
	c.render(w, "error", c.newPage(r, "Error", "", errorView{Err: err.Error()}))
}

type errorView struct{ Err string }

// windows are the periods the overview counts.
var windows = []time.Duration{time.Hour, 24 * time.Hour}

// filters are the jobs list's query parameters.
type filters struct {
	Status, Kind, Label, Since, Q, Tenant string
	// Stuck lists the jobs a worker's watchdog found stuck instead.
	Stuck bool
}

func parseFilters(q url.Values) filters {
	return filters{Status: q.Get("status"), Kind: q.Get("kind"), Label: strings.TrimSpace(q.Get("label")),
		Since: q.Get("since"), Q: strings.TrimSpace(q.Get("q")), Tenant: strings.TrimSpace(q.Get("tenant")),
		Stuck: q.Get("stuck") == "1"}
}

func (f filters) options() (jobclient.ListOptions, error) {
	o := jobclient.ListOptions{Status: f.Status, Kind: jobspec.Kind(f.Kind), IDContains: f.Q, Limit: 100, Tenant: f.Tenant, Stuck: f.Stuck}
	if f.Tenant != "" && !jobspec.ValidID(f.Tenant) {
		return o, fmt.Errorf("tenant: want a tenant id, got %q", f.Tenant)
	}
	if f.Since != "" {
		d, err := time.ParseDuration(f.Since)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("since: want a duration like 1h, got %q", f.Since)
		}
		o.Since = d
	}
	if f.Label != "" {
		k, v, ok := strings.Cut(f.Label, "=")
		if !ok || k == "" {
			return o, fmt.Errorf("label: want key=value, got %q", f.Label)
		}
		o.Labels = map[string]string{k: v}
	}
	return o, nil
}

type jobsView struct {
	Filters  filters
	Statuses []string
	Kinds    []string
	List     *jobclient.JobList
	Overview *overviewView
	Err      string
	Now      time.Time
}

func (c *Console) jobsPage(w http.ResponseWriter, r *http.Request) {
	f := parseFilters(r.URL.Query())
	if f.Q != "" && jobspec.ValidID(f.Q) {
		// An exact id goes straight to the job.
		if _, err := c.cfg.Client.Status(r.Context(), f.Q); err == nil {
			http.Redirect(w, r, Prefix+"jobs/"+url.PathEscape(f.Q), http.StatusSeeOther)
			return
		}
	}
	v := jobsView{Filters: f, Statuses: jobclient.ListStatuses, Kinds: contract.Kinds, Now: c.cfg.Now()}
	o, err := f.options()
	if err == nil {
		v.List, err = c.cfg.Client.ListJobs(r.Context(), o)
	}
	if err != nil {
		v.Err = err.Error()
	}
	if v.Overview, err = c.overview(r.Context()); err != nil && v.Err == "" {
		v.Err = err.Error()
	}
	c.render(w, "jobs", c.newPage(r, "Jobs", "jobs", v))
}

// overviewView is the counts at the top of the jobs page.
type overviewView struct {
	Kinds    []string
	Statuses []string
	Windows  []windowView
	InFlight map[string]jobclient.InFlight
	Held     int
	Waiting  uint64
	DLQ      uint64
	Quotas   []quota.Status
}

type windowView struct {
	Label  string
	Since  string
	Counts map[string]map[string]uint64
	Totals map[string]uint64
	// Exact is false when submitted and running count steps, not jobs
	// (jobclient.WindowCounts).
	Exact bool
}

func (c *Console) overview(ctx context.Context) (*overviewView, error) {
	ov, err := c.cfg.Client.Overview(ctx, windows...)
	if err != nil {
		return nil, err
	}
	v := &overviewView{Kinds: contract.Kinds, Statuses: jobclient.ListStatuses, InFlight: ov.InFlight, DLQ: ov.DeadLetters, Quotas: ov.Quotas}
	for _, f := range ov.InFlight {
		v.Held += f.Held
		v.Waiting += f.Waiting
	}
	for _, wc := range ov.Windows {
		wv := windowView{Label: "last " + jobclient.ShortDuration(wc.Window), Since: wc.Window.String(), Counts: wc.Counts, Totals: map[string]uint64{}, Exact: wc.Exact}
		for _, byStatus := range wc.Counts {
			for s, n := range byStatus {
				wv.Totals[s] += n
			}
		}
		v.Windows = append(v.Windows, wv)
	}
	return v, nil
}

// overviewFragment is the counts alone, for the script to refresh.
func (c *Console) overviewFragment(w http.ResponseWriter, r *http.Request) {
	ov, err := c.overview(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	var b bytes.Buffer
	if err := c.pages["jobs"].ExecuteTemplate(&b, "overview", ov); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

type jobView struct {
	Job       *jobclient.Job
	Timeline  []jobclient.TimelineEvent
	Spec      string
	SpecErr   string
	Retries   []jobclient.Job
	RetryOf   string
	Downloads bool
	Queued    bool
	Now       time.Time
	// Graph is a pipeline's graph; nil for the other kinds.
	Graph *graph
}

func (c *Console) jobPage(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("id")
	if !jobspec.ValidID(id) {
		c.fail(w, r, fmt.Errorf("%w: %q is not a job id", jobclient.ErrNoSuchJob, id))
		return
	}
	job, err := c.cfg.Client.Status(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := jobView{Job: job, Downloads: c.cfg.Presigner != nil, Now: c.cfg.Now(), RetryOf: job.Labels[jobclient.LabelRetryOf]}
	v.Queued = job.Status == jobclient.StatusQueued
	if !v.Queued {
		if v.Timeline, err = c.cfg.Client.Timeline(ctx, id); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	if spec, err := c.cfg.Client.Spec(ctx, id); err != nil {
		v.SpecErr = err.Error()
	} else {
		v.Spec = elideSpec(spec)
		if job.Kind == string(jobspec.KindPipeline) {
			// The spec was valid when the pipeline ran; a graph is drawn
			// from whatever of it decodes.
			if ps, _ := jobspec.Decode(spec, jobspec.KindPipeline); ps != nil {
				v.Graph = pipelineGraph(ps.Pipeline, id, job.Steps)
			}
		}
	}
	if v.Retries, err = c.cfg.Client.Retries(ctx, id); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, "job", c.newPage(r, id, "jobs", v))
}

// download sends the browser to a short-lived presigned URL of one of the
// job's artifacts; only a job's own artifacts can be fetched this way.
func (c *Console) download(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Presigner == nil {
		http.Error(w, "downloads are not available on this console", http.StatusNotFound)
		return
	}
	job, err := c.cfg.Client.Status(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 || n >= len(job.Artifacts) {
		http.Error(w, "no such artifact", http.StatusNotFound)
		return
	}
	a := job.Artifacts[n]
	u, err := c.cfg.Presigner.Presign(r.Context(), a.Bucket, a.Key, c.cfg.DownloadTTL)
	if err != nil {
		c.log.Warn().Str("key", a.Key).Err(err).Msg("console: cannot presign a download")
		http.Error(w, "cannot make a download link", http.StatusBadGateway)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u, http.StatusFound)
}

type dlqView struct {
	Letters []letterView
	Filter  jobclient.DLQFilter
	Kinds   []string
	Err     string
}

type letterView struct {
	jobclient.DeadLetter
	// Detail is the reason without the code it starts with.
	Detail    string
	Message   string
	Ambiguous bool
}

func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := jobclient.DLQFilter{Kind: jobspec.Kind(q.Get("kind")), Reason: strings.TrimSpace(q.Get("reason")), WithData: true}
	v := dlqView{Filter: f, Kinds: contract.Kinds, Letters: []letterView{}}
	dls, err := c.cfg.Client.DeadLetters(r.Context(), f)
	if err != nil {
		v.Err = err.Error()
	}
	for _, d := range slices.Backward(dls) {
		v.Letters = append(v.Letters, letterView{DeadLetter: d, Detail: strings.TrimPrefix(d.Reason, d.Code+": "),
			Message: elideSpec(d.Data), Ambiguous: d.Code == jobclient.CodeSubmitAmbiguous})
	}
	c.render(w, "dlq", c.newPage(r, "Dead letters", "dlq", v))
}

func (c *Console) cancel(_ http.ResponseWriter, r *http.Request) (string, error) {
	id := r.PathValue("id")
	res, err := c.cfg.Client.Cancel(r.Context(), id, jobclient.CancelOptions{})
	if err != nil {
		return "", err
	}
	switch res.Outcome {
	case jobclient.CancelTerminal:
		return "", fmt.Errorf("job %s already %s; nothing to cancel", id, res.Status)
	case jobclient.CancelRefused:
		return "", fmt.Errorf("job %s not cancelled: %s", id, res.Reason)
	case jobclient.CancelNoSuchJob:
		return "", fmt.Errorf("no such job %s: it is neither recorded nor waiting in %s; the cancel stays pending for %s in case it is published",
			id, contract.JobsStream, state.PendingCancelTTL)
	case jobclient.CancelRecorded:
		return "cancel recorded; no worker has seen job " + id + " yet", nil
	}
	return "cancel requested for job " + id, nil
}

func (c *Console) retry(_ http.ResponseWriter, r *http.Request) (string, error) {
	res, err := c.cfg.Client.Retry(r.Context(), r.PathValue("id"), jobclient.RetryOptions{Force: r.FormValue("force") == "on"})
	if err != nil {
		return "", err
	}
	return retryMessage(res), nil
}

func retryMessage(res *jobclient.RetryResult) string {
	if res.Duplicate {
		return "retry " + res.RetryID + " of " + res.JobID + " is already queued"
	}
	return "retrying " + res.JobID + " as " + res.RetryID
}

// letter finds the dead letter of the path's sequence.
func (c *Console) letter(r *http.Request, withData bool) (*jobclient.DeadLetter, error) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("no dead letter %q", r.PathValue("seq"))
	}
	dls, err := c.cfg.Client.DeadLetters(r.Context(), jobclient.DLQFilter{Seqs: []uint64{seq}, WithData: withData})
	if err != nil {
		return nil, err
	}
	if len(dls) == 0 {
		return nil, fmt.Errorf("dead letter %d is gone", seq)
	}
	return &dls[0], nil
}

func (c *Console) replay(_ http.ResponseWriter, r *http.Request) (string, error) {
	d, err := c.letter(r, true)
	if err != nil {
		return "", err
	}
	res, err := c.cfg.Client.Replay(r.Context(), *d, jobclient.RetryOptions{Force: r.FormValue("force") == "on"})
	if err != nil {
		return "", err
	}
	return retryMessage(res), nil
}

func (c *Console) purge(_ http.ResponseWriter, r *http.Request) (string, error) {
	d, err := c.letter(r, false)
	if err != nil {
		return "", err
	}
	if err := c.cfg.Client.PurgeDeadLetter(r.Context(), d.Seq); err != nil {
		return "", err
	}
	return fmt.Sprintf("dead letter %d removed", d.Seq), nil
}

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		// statusMeaning reads a platform status code ("statR") in words.
		"statusMeaning": apiclient.StatusMeaning,
		"age": func(t *time.Time) string {
			if t == nil {
				return "-"
			}
			return jobclient.ShortDuration(c.cfg.Now().Sub(*t)) + " ago"
		},
		"rfc3339": func(t any) string {
			switch v := t.(type) {
			case *time.Time:
				if v == nil {
					return ""
				}
				return v.UTC().Format(time.RFC3339)
			case time.Time:
				if v.IsZero() {
					return ""
				}
				return v.UTC().Format(time.RFC3339)
			}
			return ""
		},
		"clock": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
		"bytes": humanBytes,
		"json": func(v any) string {
			if raw, ok := v.(json.RawMessage); ok {
				var b bytes.Buffer
				if json.Indent(&b, raw, "", "  ") == nil {
					return b.String()
				}
				return string(raw)
			}
			b, _ := json.MarshalIndent(v, "", "  ")
			return string(b)
		},
		"labels": func(m map[string]string) []string {
			var out []string
			for _, k := range slices.Sorted(maps.Keys(m)) {
				out = append(out, k+"="+m[k])
			}
			return out
		},
		"terminal": func(s string) bool { return s == "succeeded" || s == "failed" || s == "cancelled" },
		"count":    func(m map[string]map[string]uint64, kind, status string) uint64 { return m[kind][status] },
		"esc":      url.QueryEscape,
		"list":     func(xs ...string) []string { return xs },
		"credits":  tenants.Credits,
	}
}

func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
