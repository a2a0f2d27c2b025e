package apiclient

import "encoding/json"

// This file holds the compute platform's wire types (spec/compute-api.md
// sections 2 and 4). JSON tags follow the spec's spelling exactly.

// Envelope is the code/msg/data wrapper of every compute JSON response.
// Code "0" means success.
type Envelope struct {
	Code string          `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

// TokenEntry is one element of the token response (2.1).
type TokenEntry struct {
	ClusterID   string `json:"clusterId"`
	ClusterName string `json:"clusterName"`
	Token       string `json:"token"`
}

// Center is the data of the center response (2.2).
type Center struct {
	ID              int64           `json:"id"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	ClusterUserInfo ClusterUserInfo `json:"clusterUserInfo"`
	IngressURLs     []ServiceURL    `json:"ingressUrls"`
	EfileURLs       []ServiceURL    `json:"efileUrls"`
	EshellURLs      []ServiceURL    `json:"eshellUrls"`
	HPCURLs         []ServiceURL    `json:"hpcUrls"`
	AIURLs          []ServiceURL    `json:"aiUrls"`
	EshellSSHHosts  []ServiceURL    `json:"eshellSshHosts"`
}

// ClusterUserInfo names the platform user of a center.
type ClusterUserInfo struct {
	UserName string `json:"userName"`
	HomePath string `json:"homePath"`
}

// ServiceURL is one regional address of a center list. Enable is a string
// upstream ("true" when enabled).
type ServiceURL struct {
	NodeName        string `json:"nodeName,omitempty"`
	Enable          string `json:"enable"`
	IsManagerNode   string `json:"isManagerNode,omitempty"`
	FastTransEnable string `json:"fastTransEnable,omitempty"`
	UDPPort         string `json:"udpPort,omitempty"`
	Version         string `json:"version,omitempty"`
	URL             string `json:"url"`
}

// Cluster is one element of the cluster response (2.3). ID is the scheduler
// id sent as strJobManagerID.
type Cluster struct {
	ID             int64  `json:"id"`
	Text           string `json:"text"`
	JobManagerAddr string `json:"JobManagerAddr"`
	JobManagerType string `json:"JobManagerType"`
	JobManagerPort string `json:"JobManagerPort"`
}

// Queue is one element of the user queues response (2.4) and of the queue
// limits (QueueLimits, which adds queMinNodect); all strings.
type Queue struct {
	QueueName      string `json:"queueName"`
	ID             string `json:"id"`
	Text           string `json:"text"`
	QueNodes       string `json:"queNodes"`
	QueFreeNodes   string `json:"queFreeNodes"`
	QueNcpus       string `json:"queNcpus"`
	QueFreeNcpus   string `json:"queFreeNcpus"`
	QueMaxNcpus    string `json:"queMaxNcpus"`
	QueMaxNgpus    string `json:"queMaxNgpus"`
	QueMaxNdcus    string `json:"queMaxNdcus"`
	QueMaxNmlus    string `json:"queMaxNmlus"`
	QueMaxNodect   string `json:"queMaxNodect"`
	QueMinNodect   string `json:"queMinNodect"`
	QueMaxPPN      string `json:"queMaxPPN"`
	QueMaxGpuPN    string `json:"queMaxGpuPN"`
	QueMaxDcuPN    string `json:"queMaxDcuPN"`
	QueMaxWalltime string `json:"queMaxWalltime"`
	QueChargeRate  string `json:"queChargeRate"`
	ACLHosts       string `json:"aclHosts"`
}

// The mapAppJobInfo keys of the submit job call (compute-api.md 2.5).
const (
	KeySubmitType = "GAP_SUBMIT_TYPE"
	KeyJobName    = "GAP_JOB_NAME"
	KeyPPN        = "GAP_PPN"
	KeyNodeType   = "GAP_NODE_TYPE"
	KeyNNode      = "GAP_NNODE"
	KeyWallTime   = "GAP_WALL_TIME"
	KeyWorkDir    = "GAP_WORK_DIR"
	KeySchedFile  = "GAP_SCHED_FILE"
	KeyMultiSub   = "GAP_MULTI_SUB"
	KeyStdOutFile = "GAP_STD_OUT_FILE"
	KeyStdErrFile = "GAP_STD_ERR_FILE"
	KeyJobMem     = "GAP_JOB_MEM"
	KeyNGPU       = "GAP_NGPU"
	KeyNDCU       = "GAP_NDCU"
	KeyQueue      = "GAP_QUEUE"
	KeyClusterID  = "GAP_CLUSTER_ID"
	KeyGUI        = "GAP_GUI"
	KeyAdvance    = "advance"
)

// JobRequest is the body of the submit job call (2.5). MapAppJobInfo holds
// GAP_* keys with string values, plus GAP_GUI (integer) and advance
// (boolean), so its values are untyped.
type JobRequest struct {
	StrJobManagerID string         `json:"strJobManagerID"`
	MapAppJobInfo   map[string]any `json:"mapAppJobInfo"`
}

// JobDetail is the data of the job details response (2.6). Nullable fields
// are pointers; the scheduler's free-form values stay strings.
type JobDetail struct {
	JobID          string            `json:"jobId"`
	JobName        string            `json:"jobName"`
	JobStatus      string            `json:"jobStatus"`
	Queue          string            `json:"queue"`
	User           string            `json:"user"`
	JobSubmitTime  string            `json:"jobSubmitTime"`
	JobStartTime   string            `json:"jobStartTime"`
	JobEndTime     *string           `json:"jobEndTime"`
	ExitCode       *string           `json:"exitCode"`
	NodeUsed       string            `json:"nodeUsed"`
	ProcNumUsed    int64             `json:"procNumUsed"`
	GPUNumUsed     int64             `json:"gpuNumUsed"`
	DCUNumUsed     json.RawMessage   `json:"dcuNumUsed,omitempty"`
	MemUsed        string            `json:"memUsed"`
	CPUTimeUsed    *string           `json:"cpuTimeUsed"`
	JobRunTime     string            `json:"jobRunTime"`
	WalltimeReq    string            `json:"walltimeReq"`
	NodeNumReq     int64             `json:"nodeNumReq"`
	ProcNumReq     int64             `json:"procNumReq"`
	GPUNumReq      int64             `json:"gpuNumReq"`
	DCUNumReq      json.RawMessage   `json:"dcuNumReq,omitempty"`
	WorkDir        string            `json:"workDir"`
	ErrorPath      string            `json:"errorPath"`
	OutputPath     string            `json:"outputPath"`
	Priority       string            `json:"priority"`
	Account        *string           `json:"account"`
	AppType        string            `json:"appType"`
	Scale          json.RawMessage   `json:"scale,omitempty"`
	JobVncSession  json.RawMessage   `json:"jobVncSessionInfo,omitempty"`
	JobInitAttr    map[string]string `json:"jobInitAttr"`
	JobManagerID   string            `json:"jobmanagerId"`
	JobManagerName string            `json:"jobmanagerName"`
	JobManagerType string            `json:"jobmanagerType"`
	Restarts       string            `json:"restarts"`
	AveVMSize      string            `json:"aveVMSize"`
	AveRSS         string            `json:"aveRSS"`
	// Reason is the scheduler's reason for the status (platform field,
	// not in 2.6): NonZeroExitCode marks a failure under a lagging statC.
	Reason string `json:"reason"`
}
