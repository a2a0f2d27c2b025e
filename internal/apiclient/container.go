package apiclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// This file is the client of the platform's container service
// (spec/platform-evidence.md section 5): node resource quota, create,
// execute script, detail, list and batch delete of container instances,
// all under the region's aiUrls ({ai}/ai/openapi/v2/instance-service/...),
// on the same request machinery as the job and file calls.

var (
	// ErrNoContainerService is matched when the region offers no
	// container service: the center lists no enabled aiUrls, or the
	// gateway answers HTTP 404 without an envelope to an /ai/ path.
	ErrNoContainerService = errors.New("apiclient: the region has no container service")

	// ErrInstanceNotFound is matched when the detail call's answer says
	// the instance is not there (see Instance): the platform does not
	// know it (any more).
	ErrInstanceNotFound = errors.New("apiclient: container instance not found")
)

const instancePath = "/ai/openapi/v2/instance-service"

// InstanceRequest is the create-instance body. Field names follow the
// platform's spelling.
type InstanceRequest struct {
	InstanceServiceName    string      `json:"instanceServiceName"`
	TaskType               string      `json:"taskType"`
	AcceleratorType        string      `json:"acceleratorType"`
	Version                string      `json:"version"`
	ImagePath              string      `json:"imagePath"`
	ResourceGroup          string      `json:"resourceGroup"`
	CPUNumber              int         `json:"cpuNumber"`
	GPUNumber              int         `json:"gpuNumber"`
	RAMSize                int         `json:"ramSize"`
	TaskNumber             int         `json:"taskNumber"`
	TimeoutLimit           string      `json:"timeoutLimit"`
	UseStartScript         bool        `json:"useStartScript"`
	StartScriptActionScope string      `json:"startScriptActionScope"`
	StartScriptContent     string      `json:"startScriptContent"`
	MountInfoList          []MountInfo `json:"mountInfoList,omitempty"`
	Description            string      `json:"description"`
}

// MountInfo is one mountInfoList entry.
type MountInfo struct {
	SourcePath string `json:"sourcePath"`
	TargetPath string `json:"targetPath"`
	Type       string `json:"type"`
}

// Instance is a container instance's detail (and one entry of the list).
// Times are as the platform writes them; "" for null.
type Instance struct {
	ID                  string `json:"id"`
	InstanceServiceName string `json:"instanceServiceName"`
	Status              string `json:"status"`
	AcceleratorType     string `json:"acceleratorType"`
	ResourceGroup       string `json:"resourceGroup"`
	ResourceSpec        string `json:"resourceSpec"`
	TimeoutLimit        string `json:"timeoutLimit"`
	CreateTime          string `json:"createTime"`
	StartTime           string `json:"startTime"`
	EndTime             string `json:"endTime"`
	Duration            string `json:"duration"`
	RemainingTime       string `json:"remainingTime"`
}

// UnmarshalJSON decodes an instance leniently.
func (i *Instance) UnmarshalJSON(b []byte) error { return decodeLenient(b, i) }

// NodeResources is the node resource quota of a resource group: the most
// one instance may ask for. Zero means the platform did not say.
type NodeResources struct {
	ResourceGroup string `json:"resourceGroup"`
	CPUNumber     int64  `json:"cpuNumber"`
	GPUNumber     int64  `json:"gpuNumber"`
	MemorySize    int64  `json:"memorySize"`
	NvLimits      int64  `json:"nvLimits"`
	DcuLimits     int64  `json:"dcuLimits"`
	MluLimits     int64  `json:"mluLimits"`
	NodeNumber    int64  `json:"nodeNumber"`
	MaxTime       string `json:"maxTime"`
}

// UnmarshalJSON decodes node resources leniently.
func (n *NodeResources) UnmarshalJSON(b []byte) error { return decodeLenient(b, n) }

// HasContainers reports whether the center lists an enabled container
// service address for the region.
func (s *ClusterSession) HasContainers() bool { return s.ai != nil }

// HomePath returns the user's home directory on the region's shared
// storage (clusterUserInfo.homePath), "" when the center names none.
func (s *ClusterSession) HomePath() string { return s.center.ClusterUserInfo.HomePath }

// aiCall runs a container service call: ErrNoContainerService when the
// region lists no address or its gateway does not know /ai/.
func (s *ClusterSession) aiCall(ctx context.Context, rq *request) (*result, error) {
	if s.ai == nil {
		return nil, fmt.Errorf("apiclient: compute %s: %w (center.aiUrls lists no enabled address for region %s)", rq.op, ErrNoContainerService, s.clusterName)
	}
	rq.svc, rq.auth = svcAI, true
	res, err := s.c.exchange(ctx, s, rq)
	if env, ok := errors.AsType[*EnvelopeError](err); ok && env.Status == http.StatusNotFound && env.Code == "" {
		return nil, fmt.Errorf("apiclient: compute %s: %w (the gateway of region %s answers HTTP 404 to %s): %w", rq.op, ErrNoContainerService, s.clusterName, cmp.Or(rq.pathTmpl, rq.path), err)
	}
	return res, err
}

// probeAI runs rq, the call that asks a region's container service first
// for a job (the node resource quota, which names no instance), through
// aiCall. Its 404 is remembered for noAIFor: the next jobs' probes fail at
// once, without a request. Only the probe reads or sets it: a 404 to one
// instance's detail or delete may mean that instance is gone, and a
// delete must never be skipped on a remembered answer.
func (s *ClusterSession) probeAI(ctx context.Context, rq *request) (*result, error) {
	now := s.c.cfg.Now()
	if until := s.noAIUntil.Load(); until != 0 && now.Before(time.Unix(0, until)) {
		return nil, fmt.Errorf("apiclient: compute %s: %w (the gateway of region %s answered HTTP 404 to /ai/ at %s)", rq.op, ErrNoContainerService, s.clusterName, time.Unix(0, s.noAISince.Load()).UTC().Format(time.RFC3339))
	}
	res, err := s.aiCall(ctx, rq)
	if s.ai != nil && errors.Is(err, ErrNoContainerService) {
		s.noAISince.Store(now.UnixNano())
		s.noAIUntil.Store(now.Add(noAIFor).UnixNano())
	}
	return res, err
}

// noAIFor is how long a region whose gateway answered 404 to the probe
// is taken to have no container service: long enough that a queue of
// container jobs for it fails without a request each, short enough that
// a service added later is found.
const noAIFor = 10 * time.Minute

// NodeResources fetches the node resource quota of resourceGroup for
// acceleratorType (GET .../instance-service/resources). Retried like any
// read. The answer's shape is read liberally: an object, or a list whose
// entry naming resourceGroup (else the first) is taken.
func (s *ClusterSession) NodeResources(ctx context.Context, acceleratorType, resourceGroup string) (*NodeResources, error) {
	if acceleratorType == "" || resourceGroup == "" {
		return nil, invalidArg("acceleratorType, resourceGroup", "are required")
	}
	res, err := s.probeAI(ctx, &request{
		op: "container resources", method: http.MethodGet,
		path:  instancePath + "/resources",
		query: url.Values{"acceleratorType": {acceleratorType}, "resourceGroup": {resourceGroup}},
		class: classIdempotent,
	})
	if err != nil {
		return nil, err
	}
	data := bytes.TrimSpace(res.data)
	switch {
	case isNull(data) || len(data) == 0:
		return &NodeResources{}, nil
	case data[0] == '[':
		var list []NodeResources
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("apiclient: compute container resources: %w: %w", ErrMalformedResponse, err)
		}
		if len(list) == 0 {
			return &NodeResources{}, nil
		}
		for i := range list {
			if list[i].ResourceGroup == resourceGroup {
				return &list[i], nil
			}
		}
		return &list[0], nil
	}
	var n NodeResources
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("apiclient: compute container resources: %w: %w", ErrMalformedResponse, err)
	}
	return &n, nil
}

// CreateInstance creates a container instance (POST
// .../instance-service/task) and returns its id. Creating is paid (the
// instance is billed until deleted), so it is repeated only when the
// platform certainly did not act, as SubmitJob is; any other failure after
// the request may have arrived matches ErrAmbiguous: the instance may
// exist, and the caller looks for it by its instanceServiceName (Instances)
// before creating another.
func (s *ClusterSession) CreateInstance(ctx context.Context, req InstanceRequest) (string, error) {
	if req.InstanceServiceName == "" {
		return "", invalidArg("req.InstanceServiceName", "is required")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", invalidArg("req", "cannot be sent as JSON")
	}
	rq := &request{
		op: "create container instance", method: http.MethodPost,
		path: instancePath + "/task", jsonBody: body, class: classSubmit,
	}
	res, err := s.aiCall(ctx, rq)
	if err != nil {
		return "", err
	}
	id, err := lenientString(res.data)
	if err != nil || strings.TrimSpace(id) == "" {
		return "", s.c.ambiguous(rq, fmt.Errorf("%w: success without an instance id", ErrMalformedResponse))
	}
	return strings.TrimSpace(id), nil
}

// ExecuteScript runs script in the instance's containers (POST
// .../task/actions/execute-script, scope "all"). The platform answers at
// once; nothing reports when the script ends. Not repeated after an
// ambiguous failure (the script would run twice).
func (s *ClusterSession) ExecuteScript(ctx context.Context, instanceID, script string) error {
	if err := checkInstanceID(instanceID); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"id": instanceID, "startScriptActionScope": "all", "startScriptContent": script})
	_, err := s.aiCall(ctx, &request{
		op: "execute script", method: http.MethodPost,
		path: instancePath + "/task/actions/execute-script", jsonBody: body, class: classSubmit,
	})
	return err
}

// Instance fetches an instance's detail (GET .../instance-service/{id}/detail),
// retried like any read. Only an answer that says the instance is not
// there matches ErrInstanceNotFound: a null data, HTTP 404 with an
// envelope, or an error envelope whose message says it does not exist
// (EnvelopeError.saysMissing, the rule Job follows). A busy answer (10001)
// or any other error envelope is returned as it is: it says nothing about
// the instance, which may be running and billed.
func (s *ClusterSession) Instance(ctx context.Context, instanceID string) (*Instance, error) {
	if err := checkInstanceID(instanceID); err != nil {
		return nil, err
	}
	res, err := s.aiCall(ctx, &request{
		op: "container detail", method: http.MethodGet,
		path:     instancePath + "/" + url.PathEscape(instanceID) + "/detail",
		pathTmpl: instancePath + "/{id}/detail",
		class:    classIdempotent,
	})
	if err != nil {
		if env, ok := errors.AsType[*EnvelopeError](err); ok && env.saysMissing() {
			return nil, fmt.Errorf("apiclient: compute container %s: %w: %w", instanceID, ErrInstanceNotFound, err)
		}
		return nil, err
	}
	if isNull(res.data) {
		return nil, fmt.Errorf("apiclient: compute container %s: %w: the platform answered no detail", instanceID, ErrInstanceNotFound)
	}
	var in Instance
	if err := json.Unmarshal(res.data, &in); err != nil {
		return nil, fmt.Errorf("apiclient: compute container %s: %w: %w", instanceID, ErrMalformedResponse, err)
	}
	return &in, nil
}

// Instances lists the user's instances (GET .../instance-service/task/list).
// The answer's shape is not documented: data may be the list itself or an
// object holding it under list, records, rows, items or data.
func (s *ClusterSession) Instances(ctx context.Context) ([]Instance, error) {
	res, err := s.aiCall(ctx, &request{
		op: "container list", method: http.MethodGet,
		path: instancePath + "/task/list", class: classIdempotent,
	})
	if err != nil {
		return nil, err
	}
	return decodeInstanceList(res.data)
}

func decodeInstanceList(data json.RawMessage) ([]Instance, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || isNull(data) {
		return nil, nil
	}
	if data[0] == '[' {
		var list []Instance
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("apiclient: compute container list: %w: %w", ErrMalformedResponse, err)
		}
		return list, nil
	}
	var page map[string]json.RawMessage
	if err := json.Unmarshal(data, &page); err != nil {
		return nil, fmt.Errorf("apiclient: compute container list: %w: data is neither a list nor an object", ErrMalformedResponse)
	}
	for _, key := range []string{"list", "records", "rows", "items", "data", "content"} {
		for k, v := range page {
			if strings.EqualFold(k, key) {
				return decodeInstanceList(v)
			}
		}
	}
	return nil, fmt.Errorf("apiclient: compute container list: %w: no list under list, records, rows, items, data or content", ErrMalformedResponse)
}

// FindInstances returns the user's instances named name
// (instanceServiceName), the way back to an instance whose create answer
// was lost.
func (s *ClusterSession) FindInstances(ctx context.Context, name string) ([]Instance, error) {
	all, err := s.Instances(ctx)
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, in := range all {
		if in.InstanceServiceName == name && in.ID != "" {
			out = append(out, in)
		}
	}
	return out, nil
}

// DeleteInstances deletes instances in one call (DELETE
// .../instance-service/task?ids=..&ids=..). Deleting again is harmless,
// so the call is retried like a read.
func (s *ClusterSession) DeleteInstances(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return invalidArg("ids", "at least one is required")
	}
	for _, id := range ids {
		if err := checkInstanceID(id); err != nil {
			return err
		}
	}
	_, err := s.aiCall(ctx, &request{
		op: "delete container instances", method: http.MethodDelete,
		path: instancePath + "/task", query: url.Values{"ids": ids}, class: classIdempotent,
	})
	return err
}

func checkInstanceID(id string) error {
	switch {
	case id == "":
		return invalidArg("instanceID", "is required")
	case strings.ContainsAny(id, "/\\?#\x00"):
		return invalidArg("instanceID", "must not contain a path separator")
	}
	return nil
}

// InstancePhase is the client's reading of an instance's status.
type InstancePhase string

// The phases of an instance (the console's six states). Completed, Failed
// and Stopped are end states; Unknown means "not recognised".
const (
	InstanceUnknown   InstancePhase = "unknown"
	InstanceWaiting   InstancePhase = "waiting"
	InstanceDeploying InstancePhase = "deploying"
	InstanceRunning   InstancePhase = "running"
	InstanceCompleted InstancePhase = "completed"
	InstanceFailed    InstancePhase = "failed"
	InstanceStopped   InstancePhase = "stopped"
)

// Ended reports whether p is an end state.
func (p InstancePhase) Ended() bool {
	return p == InstanceCompleted || p == InstanceFailed || p == InstanceStopped
}

// instanceStatusTable maps lower-case English status values; Chinese
// names are matched by instanceStatusWords.
var instanceStatusTable = map[string]InstancePhase{
	"waiting": InstanceWaiting, "pending": InstanceWaiting, "queued": InstanceWaiting, "queuing": InstanceWaiting,
	"creating": InstanceDeploying, "deploying": InstanceDeploying, "deploy": InstanceDeploying, "starting": InstanceDeploying,
	"running": InstanceRunning, "run": InstanceRunning,
	"completed": InstanceCompleted, "complete": InstanceCompleted, "finished": InstanceCompleted,
	"succeeded": InstanceCompleted, "success": InstanceCompleted, "done": InstanceCompleted,
	"failed": InstanceFailed, "fail": InstanceFailed, "error": InstanceFailed, "abnormal": InstanceFailed,
	"stopped": InstanceStopped, "stop": InstanceStopped, "terminated": InstanceStopped,
	"cancelled": InstanceStopped, "canceled": InstanceStopped, "deleted": InstanceStopped, "timeout": InstanceStopped,
}

// instanceStatusWords are the console's Chinese state names; a status
// containing one reads as its phase (e.g. 运行中, 已停止).
var instanceStatusWords = []struct {
	word  string
	phase InstancePhase
}{
	{"失败", InstanceFailed}, {"停止", InstanceStopped}, {"完成", InstanceCompleted},
	{"运行", InstanceRunning}, {"部署", InstanceDeploying}, {"等待", InstanceWaiting},
}

// InstancePhaseOf reads an instance's status case-insensitively, in
// English (Waiting, Deploying, Running, Completed, Failed, Stopped and
// their usual synonyms) or as the console's Chinese names (等待, 部署, 运行,
// 完成, 失败, 停止). A status it does not know reads Unknown, or Stopped
// when the detail carries an endTime; a status it knows is read as it is,
// end time or not (a Running instance bills). A nil instance is Unknown.
func InstancePhaseOf(in *Instance) InstancePhase {
	if in == nil {
		return InstanceUnknown
	}
	v := strings.ToLower(strings.TrimSpace(in.Status))
	p, ok := instanceStatusTable[v]
	if !ok {
		p = InstanceUnknown
		for _, w := range instanceStatusWords {
			if strings.Contains(v, w.word) {
				p = w.phase
				break
			}
		}
	}
	if p == InstanceUnknown && present(&in.EndTime) && strings.Trim(in.EndTime, "-") != "" {
		return InstanceStopped
	}
	return p
}
