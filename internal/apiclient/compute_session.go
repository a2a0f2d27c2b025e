package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ClusterSession is the client's view of one cluster: its token (kept
// fresh by the parent Compute), its center information and the enabled
// efile, hpc and ai addresses. Calls go to the first enabled address of each
// list and move on to the next when a connection cannot be made; the
// address that worked is kept for later calls. Safe for concurrent use.
type ClusterSession struct {
	c           *Compute
	clusterID   string
	clusterName string
	center      Center
	efile, hpc  *serviceURLs
	ai          *serviceURLs // nil when the center lists no container service
	// noAISince and noAIUntil (unix nanoseconds, 0 = never) remember the
	// gateway's 404 to the container probe (see probeAI).
	noAISince, noAIUntil atomic.Int64

	schedMu sync.Mutex
	schedID string

	// board is the last read of the region's realtime job list
	// (ListedJob).
	board statusBoard
}

// serviceURLs holds the enabled addresses of one service and the index of
// the one to try first.
type serviceURLs struct {
	urls []*url.URL
	pref atomic.Int32
}

func (s *serviceURLs) get(i int) *url.URL { return s.urls[i%len(s.urls)] }

// enabledURLs keeps the addresses whose enable is "true" and that parse as
// http(s) URLs, in the center's order, each without a trailing segment
// (e.g. "/efile"): the platform lists https://host:port/efile, the
// documents write {efile_url}/efile/..., and every request path starts
// with its segment, so it appears exactly once either way.
func enabledURLs(field, segment string, list []ServiceURL) (*serviceURLs, error) {
	out := &serviceURLs{}
	for _, su := range list {
		if !strings.EqualFold(strings.TrimSpace(su.Enable), "true") {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(su.URL))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), segment)
		u.RawPath, u.RawQuery, u.Fragment = "", "", ""
		out.urls = append(out.urls, u)
	}
	if len(out.urls) == 0 {
		return nil, fmt.Errorf("%w: center.%s has no enabled http(s) url", ErrNoServiceURL, field)
	}
	return out, nil
}

// ClusterID returns the clusterId of the token response.
func (s *ClusterSession) ClusterID() string { return s.clusterID }

// ClusterName returns the clusterName of the token response.
func (s *ClusterSession) ClusterName() string { return s.clusterName }

// UserName returns the platform user of the center (clusterUserInfo.userName),
// the user_name of Queues.
func (s *ClusterSession) UserName() string { return s.center.ClusterUserInfo.UserName }

func (s *ClusterSession) fetchCenter(ctx context.Context) (Center, error) {
	res, err := s.c.exchange(ctx, s, &request{
		op: "center", method: http.MethodGet, svc: svcBase, auth: true,
		path: "/ac/openapi/v2/center", class: classIdempotent,
	})
	if err != nil {
		return Center{}, err
	}
	var c Center
	if err := json.Unmarshal(res.data, &c); err != nil || isNull(res.data) {
		return Center{}, fmt.Errorf("apiclient: compute center: %w: data is not center information", ErrMalformedResponse)
	}
	return c, nil
}

// Center returns the center information fetched when the session was
// resolved. It never fails; ctx is accepted for symmetry with the other
// calls.
func (s *ClusterSession) Center(ctx context.Context) (*Center, error) {
	c := s.center
	c.IngressURLs = slices.Clone(c.IngressURLs)
	c.EfileURLs = slices.Clone(c.EfileURLs)
	c.EshellURLs = slices.Clone(c.EshellURLs)
	c.HPCURLs = slices.Clone(c.HPCURLs)
	c.AIURLs = slices.Clone(c.AIURLs)
	c.EshellSSHHosts = slices.Clone(c.EshellSSHHosts)
	return &c, nil
}

// Clusters lists the cluster's job schedulers (GET .../cluster). Retried
// on network errors, 429 and 5xx.
func (s *ClusterSession) Clusters(ctx context.Context) ([]Cluster, error) {
	res, err := s.c.exchange(ctx, s, &request{
		op: "cluster", method: http.MethodGet, svc: svcHPC, auth: true,
		path: "/hpc/openapi/v2/cluster", class: classIdempotent,
	})
	if err != nil {
		return nil, err
	}
	var out []Cluster
	if err := json.Unmarshal(res.data, &out); err != nil {
		return nil, fmt.Errorf("apiclient: compute cluster: %w: data is not a list of clusters", ErrMalformedResponse)
	}
	return out, nil
}

// SchedulerID returns the id of the first entry of Clusters as a string,
// the strJobManagerID of Queues and SubmitJob. It is fetched once and
// cached. An empty cluster list is an error matching ErrMalformedResponse.
func (s *ClusterSession) SchedulerID(ctx context.Context) (string, error) {
	s.schedMu.Lock()
	id := s.schedID
	s.schedMu.Unlock()
	if id != "" {
		return id, nil
	}
	list, err := s.Clusters(ctx)
	if err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "", fmt.Errorf("apiclient: compute cluster: %w: the cluster list is empty", ErrMalformedResponse)
	}
	id = strconv.FormatInt(list[0].ID, 10)
	s.schedMu.Lock()
	s.schedID = id
	s.schedMu.Unlock()
	return id, nil
}

// schedulerOr returns id, or SchedulerID(ctx) when id is empty.
func (s *ClusterSession) schedulerOr(ctx context.Context, id string) (string, error) {
	if id != "" {
		return id, nil
	}
	return s.SchedulerID(ctx)
}

// Queues lists the queues userName may use on scheduler schedulerID. An
// empty userName means UserName(), an empty schedulerID means
// SchedulerID(ctx). Retried on network errors, 429 and 5xx.
func (s *ClusterSession) Queues(ctx context.Context, userName, schedulerID string) ([]Queue, error) {
	if userName == "" {
		userName = s.UserName()
	}
	if userName == "" {
		return nil, invalidArg("userName", "is required (the center names no user)")
	}
	schedulerID, err := s.schedulerOr(ctx, schedulerID)
	if err != nil {
		return nil, err
	}
	res, err := s.c.exchange(ctx, s, &request{
		op: "queues", method: http.MethodGet, svc: svcHPC, auth: true,
		path:     "/hpc/openapi/v2/queuenames/users/" + url.PathEscape(userName),
		pathTmpl: "/hpc/openapi/v2/queuenames/users/{user_name}",
		query:    url.Values{"strJobManagerID": {schedulerID}},
		class:    classIdempotent,
	})
	if err != nil {
		return nil, err
	}
	var out []Queue
	if err := json.Unmarshal(res.data, &out); err != nil {
		return nil, fmt.Errorf("apiclient: compute queues: %w: data is not a list of queues", ErrMalformedResponse)
	}
	return out, nil
}
