package apisim

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Endpoint names of the compute simulator, for Faults.Set and the
// "requests:<endpoint>:<status>" counters.
const (
	EndpointComputeTokens   = "compute.tokens"
	EndpointComputeCenter   = "compute.center"
	EndpointComputeUpload   = "compute.upload"
	EndpointComputeCluster  = "compute.cluster"
	EndpointComputeQueues   = "compute.queues"
	EndpointComputeSubmit   = "compute.submit"
	EndpointComputeJob      = "compute.job"
	EndpointComputeDownload = "compute.download"
	// EndpointComputeAKSK is the AK/SK login (platform mode only).
	EndpointComputeAKSK = "compute.aksk"
	// EndpointComputeBurst receives one chunk of a chunked upload
	// (platform mode only).
	EndpointComputeBurst = "compute.burst"
	// EndpointComputeMerge joins the chunks (platform mode only).
	EndpointComputeMerge = "compute.merge"
	// EndpointComputeList lists a directory (platform mode only).
	EndpointComputeList = "compute.list"
	// EndpointComputeLimits answers each queue's limits (platform mode
	// only).
	EndpointComputeLimits = "compute.limits"
	// EndpointComputeTokensNext renews a token (platform mode only).
	EndpointComputeTokensNext = "compute.tokens.next"
)

// Envelope codes the compute simulator answers with. The platform's own
// codes are not documented; these are the simulator's choice.
const (
	// ComputeCodeBadCredentials: the token call's user, password or orgid
	// is wrong (HTTP 401).
	ComputeCodeBadCredentials = "10001"
	// ComputeCodeBadToken: the token header is missing, unknown, replaced
	// or used up (HTTP 401).
	ComputeCodeBadToken = "10002"
	// ComputeCodeInvalid: a parameter is missing or wrong; msg names it
	// (HTTP 200).
	ComputeCodeInvalid = "20001"
	// ComputeCodeNotFound: the file or job does not exist (HTTP 200).
	ComputeCodeNotFound = "20002"
	// ComputeCodeExists: an upload without cover hit an existing file
	// (HTTP 200).
	ComputeCodeExists = "20003"
	// ComputeCodeInternal: the simulator itself failed (HTTP 500).
	ComputeCodeInternal = "50001"
	// ComputeCodePlatformInternal is the platform's "internal error"
	// (HTTP 200), which the center answers to the platform's own token
	// and the realtime detail of a job with "#SIM detailerror" (platform
	// mode).
	ComputeCodePlatformInternal = "10001"
	// ComputeCodeDenied is the platform's "permission denied" (HTTP
	// 200), answered to the platform's own token on a region's service
	// (platform mode).
	ComputeCodeDenied = "10008"
	// ComputeCodeCheckFailed is the platform's "check failed" (HTTP 200):
	// the AK/SK login's user, access key or signature is wrong.
	ComputeCodeCheckFailed = "10009"
	// The platform's file codes (platform-evidence.md section 7; HTTP
	// 200): a file missing (a download, platform mode), a file that
	// exists (an upload with uncover, platform mode), no permission on
	// the path (DenyFiles) and storage full (SetStorageFull).
	ComputeCodeFileMissing  = "911020"
	ComputeCodeFileExists   = "911021"
	ComputeCodeNoPermission = "911030"
	ComputeCodeStorageFull  = "911501"
)

// ComputeRegionNoAI is the region (id "1004", platform mode) whose center
// lists a container service address but whose gateway answers HTTP 404
// to every /ai/ path, as one of the platform's regions does.
const ComputeRegionNoAI = "cluster-d"

// ComputeConfig configures the compute platform simulator. Fields are in a
// stable order.
type ComputeConfig struct {
	// User, Password and OrgID are the credentials the token call must
	// carry; User is also the cluster user (clusterUserInfo.userName).
	// Empty values accept any non-empty header. Defaults to "".
	User, Password, OrgID string
	// AccessKey and SecretKey are the AK/SK login's credentials (platform
	// mode): the login must carry AccessKey and a signature made with
	// SecretKey. Empty values accept any non-empty header. Defaults to "".
	AccessKey, SecretKey string
	// TokenLifetime is how long a token stays valid (platform mode): its
	// JWT payload carries the expireTime, an expired token answers 401,
	// a login hands out a new token once half of it has passed, and
	// POST /ac/openapi/v2/tokens/next renews a token that has not
	// expired yet. Defaults to 24h, the platform's.
	TokenLifetime time.Duration
	// BaseURL is the scheme://host[:port] the center lists as efile and
	// hpc address. Defaults to "", which builds it from the request's Host
	// (and TLS state).
	BaseURL string
	// QueuedFor is how long a job stays queued after submit. Defaults to
	// 1s; a script's "#SIM queuedfor" overrides it per job.
	QueuedFor time.Duration
	// RunFor is how long a job runs. Defaults to 3s; a script's
	// "#SIM runfor" overrides it per job.
	RunFor time.Duration
	// HistoryDelay is how long an ended job stays in the realtime job
	// detail and job list before it answers only from the job history
	// (platform mode; Letter keeps it there). Defaults to 2s.
	HistoryDelay time.Duration
	// ListKeeps is how long an ended job stays in the realtime job list
	// (GET .../jobs?strClusterIDList=) in platform mode, after the detail
	// dropped it: the platform's list keeps a finished job about 5
	// minutes (platform-evidence.md section 7). Defaults to 5m; never
	// shorter than HistoryDelay.
	ListKeeps time.Duration
	// ListPageLimit is the most jobs one page of the realtime job list
	// holds: a larger limit is cut to it (the answer's total still counts
	// every job). Defaults to 100.
	ListPageLimit int
	// FailureRate is the probability in [0, 1] that a job whose script
	// does not exit explicitly ends with exit code 1. Defaults to 0.
	FailureRate float64
	// TokenMaxUses is how many authenticated requests a token serves
	// before it expires (HTTP 401, code ComputeCodeBadToken); the next
	// token call hands out a new one. Defaults to 0, unlimited.
	TokenMaxUses int
	// Now reads the clock that moves jobs along. Defaults to time.Now.
	Now func() time.Time
	// Root is the directory holding the simulated cluster file system
	// (cluster path /a/b is Root/a/b; both clusters share it). Defaults to
	// "", a new temporary directory that Close removes.
	Root string
	// DeadURL, when set, is listed first (enabled) in efileUrls and
	// hpcUrls, e.g. the address of a closed listener, to exercise
	// failover. Defaults to "".
	DeadURL string
	// Letter makes the simulator follow compute-api.md to the letter where
	// the real platform differs from it (spec/platform-evidence.md): center
	// URLs without their service segment, a token answer holding only
	// usable clusters and no AK/SK login, finished jobs that stay in the
	// realtime job detail, no history, cancel, chunked upload or queue
	// limits (userquotas/queues). Defaults
	// to false: the simulator behaves like the platform.
	Letter bool
	// StateFile, when set, is where the simulator keeps its jobs (and the
	// submit counts and the next job id), rewritten after each change and
	// read back by NewCompute, so that a restarted simulator resumes them
	// (with Root, which holds their files). Defaults to "", memory only.
	StateFile string
}

func (c ComputeConfig) withDefaults() ComputeConfig {
	c.QueuedFor = cmp.Or(c.QueuedFor, time.Second)
	c.RunFor = cmp.Or(c.RunFor, 3*time.Second)
	c.TokenLifetime = cmp.Or(c.TokenLifetime, 24*time.Hour)
	c.HistoryDelay = cmp.Or(c.HistoryDelay, 2*time.Second)
	c.ListKeeps = max(cmp.Or(c.ListKeeps, 5*time.Minute), c.HistoryDelay)
	c.ListPageLimit = cmp.Or(c.ListPageLimit, 100)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// simCluster is one simulated cluster with its job scheduler.
type simCluster struct {
	id, name    string
	schedID     int64
	schedType   string
	token       string // the current token; "" before the first token call
	tokenUses   int
	issuedAt    time.Time // when token was handed out
	suspended   bool      // platform mode: listed with token null
	noAI        bool      // platform mode: /ai/ paths answer 404
	noImages    map[string]bool
	queues      []simQueue
	schedName   string
	managerAddr string
}

// simQueue is one queue and its limits; a zero maxGPUPN or maxDCUPN
// means the queue has no such cards. minDCUs is the scheduler's minimum
// of DCUs per job (QOSMinGRES), which the limits answer does not show.
type simQueue struct {
	name     string
	maxNodes int
	maxPPN   int
	maxWall  time.Duration
	maxGPUPN int
	maxDCUPN int
	minDCUs  int
}

// Compute simulates the compute platform (spec/compute-api.md): tokens for
// two clusters ("cluster-a" id "1001" with scheduler 2001, "cluster-b" id
// "1002" with scheduler 2002, both with queues "debug", "normal" and
// "dcu"; in platform mode also the suspended "cluster-c" id "1003" with
// token null, ComputeRegionNoAI "cluster-d" id "1004" without a container
// service behind its gateway, and the platform's own entry "0"/"ac", see
// ComputeConfig.Letter), the center, file upload and download on a real
// directory tree, the cluster and queue lists, the queues' limits
// (platform mode: GET .../userquotas/queues?strJobManagerID=), job
// submission (template BASIC/BASE) and job details. Safe for concurrent
// use.
//
// # Queues
//
// debug takes 1-2 nodes of at most 32 cores for 30 minutes; normal 1-16
// nodes of at most 64 cores and 4 GPUs for 72 hours; dcu 1-4 nodes of at
// most 32 cores and 4 DCUs for 24 hours, and, like some DCU queues of the
// platform, refuses a job without a DCU (GAP_NDCU >= 1) with the
// scheduler's QOSMinGRES in msg, a minimum its limits do not show. A
// submit over a queue's limits answers HTTP 200 with ComputeCodeInvalid
// and a message naming the key and the limit: nothing is created.
//
// Failure shapes (the platform's are not documented): bad credentials
// and bad tokens answer HTTP 401 with an error envelope; every other
// refusal answers HTTP 200 with an error envelope (the ComputeCode*
// codes); injected faults answer their status with an envelope whose code
// is the status.
//
// # Jobs
//
// A submitted job is queued for QueuedFor, runs for RunFor and then
// completes (jobStatus statQ/QUEUED, statR/RUNNING, statC/COMPLETED with
// jobEndTime and exitCode), computed lazily from the clock whenever a
// request or File looks. A run longer than GAP_WALL_TIME is ended at the
// wall time: statT/TIMEOUT, exit code 10006. Job times are written in the
// platform's zone (UTC+8).
//
// Like the platform (spec/platform-evidence.md; not in Letter mode), an
// ended job stays in the realtime detail for HistoryDelay, then the
// detail answers a success without a record (data null), and in the
// realtime job list for ListKeeps; the job is then found in the job
// history: GET .../historyjobs/{jobmanagerId}/
// {jobId} (acctTime accepted) and GET .../historyjobs (strClusterNameList
// or strClusterIDList, startTime and endTime in UTC+8 bounding the end,
// start, limit, jobId), whose records carry jobState, jobExitStatus,
// jobEndTime, acctTime and accounting derived from nodes, ppn, GAP_NGPU,
// GAP_NDCU and the run time. GET .../jobs?strClusterIDList= lists current
// jobs; DELETE .../jobs (form jobMethod=5, strJobInfoMap=<scheduler
// id>,<user>:<job id>:[;...]) cancels queued or running jobs (statDE) and
// refuses ended or unknown ones. A job the platform does not know answers
// an error envelope whose message says it does not exist (不存在). Its scheduler script (GAP_SCHED_FILE, read at
// submit) drives it. Lines are trimmed; other lines (the shebang,
// #SBATCH/#PBS headers, other commands) are ignored.
//
// Read at submit, anywhere in the script:
//
//	#SIM queuedfor <duration>   stay queued this long (Go duration, e.g. 90s)
//	#SIM runfor <duration>      run this long
//	#SIM vanish                 disappear when the run ends: job details
//	                            then answer not found, no files are written
//	#SIM nodefail               end statN/NODE_FAIL (exit code 1 at least)
//	#SIM lagfail                end with the platform's status lagging the
//	                            scheduler: statC with JobState FAILED and
//	                            reason NonZeroExitCode, exit code 0 in the
//	                            detail, 1 in the history
//	#SIM detailerror [n]        after the end, the next n (default 1)
//	                            realtime detail queries answer envelope
//	                            10001 (ComputeCodePlatformInternal)
//
// Executed in order when the run ends (relative paths are relative to the
// job's work directory, GAP_WORK_DIR or the script's directory):
//
//	echo <text>                 append <text> and a newline to stdout
//	#SIM stderr <text>          append <text> and a newline to stderr
//	#SIM output <path> <size>   write a file of <size> bytes (suffix K, M or
//	                            G for KiB, MiB, GiB) with ComputeOutputBytes
//	cp <src> <dst>              copy a file (into <dst> if it is a directory);
//	                            a missing source writes a message to stderr
//	                            and ends the script with exit code 1
//	exit <code>                 end the script with <code>
//	#SIM exit <code>            the same
//
// A script that does not exit explicitly ends with 0, or with 1 at
// probability FailureRate. stdout and stderr go to GAP_STD_OUT_FILE and
// GAP_STD_ERR_FILE, by default <work_dir>/<job name>.o<job id> and
// .e<job id> (reported as outputPath and errorPath); both are always
// written when the job completes.
type Compute struct {
	cfg      ComputeConfig
	mux      *http.ServeMux
	faults   Faults
	counters Counters

	root    string
	rootErr error
	ownRoot bool

	loadErr error

	mu       sync.Mutex
	clusters []*simCluster
	jobs     map[string]*simJob
	nextJob  int64
	submits  map[string]int64
	issued   []string // every token handed out
	platTok  string   // platform mode: the platform's own token ("0"/"ac")
	uploads  map[string]*chunkedUpload
	ctr      *containerSim // platform mode: the container service
	// fileMu guards full and denied apart from mu, which a merge holds
	// while it places its file.
	fileMu sync.Mutex
	full   bool           // every write answers storage full
	fullAt map[string]int // files whose writes answer storage full: refusals
	denied []string       // paths (and all below) without permission
	busy   busyAnswers    // requests to answer busy (AnswerBusy)
	// saved is the state file's content, rewritten in part by the jobs
	// (under mu) and by the container service (under ctr.mu); its own
	// lock is taken last.
	saved struct {
		mu sync.Mutex
		st computeState
	}
}

// NewCompute returns a compute simulator. When cfg.Root is empty it creates
// a temporary directory (remove it with Close); if that fails, every file
// operation answers ComputeCodeInternal.
func NewCompute(cfg ComputeConfig) *Compute {
	c := &Compute{
		cfg:     cfg.withDefaults(),
		jobs:    make(map[string]*simJob),
		nextJob: 4000,
		submits: make(map[string]int64),
		uploads: make(map[string]*chunkedUpload),
	}
	c.root = cfg.Root
	if c.root == "" {
		c.root, c.rootErr = os.MkdirTemp("", "apisim-compute-")
		c.ownRoot = c.rootErr == nil
	}
	c.clusters = []*simCluster{
		{id: "1001", name: "cluster-a", schedID: 2001, schedType: "SLURM", schedName: "slurm-a", managerAddr: "10.0.0.11", queues: defaultQueues()},
		{id: "1002", name: "cluster-b", schedID: 2002, schedType: "PBS", schedName: "pbs-b", managerAddr: "10.0.0.12", queues: defaultQueues()},
	}
	if !c.cfg.Letter {
		c.clusters = append(c.clusters, &simCluster{id: "1003", name: "cluster-c", suspended: true},
			&simCluster{id: "1004", name: ComputeRegionNoAI, schedID: 2004, schedType: "SLURM", schedName: "slurm-d", managerAddr: "10.0.0.14", queues: defaultQueues(), noAI: true})
	}
	mux := http.NewServeMux()
	c.handle(mux, "POST /ac/openapi/v2/tokens", EndpointComputeTokens, c.tokens)
	if !c.cfg.Letter {
		c.handle(mux, "POST /api/user/v3/tokens", EndpointComputeAKSK, c.akskTokens)
		c.handle(mux, "POST /ac/openapi/v2/tokens/next", EndpointComputeTokensNext, c.renewToken)
		c.handle(mux, "POST /efile/openapi/v2/file/burst", EndpointComputeBurst, c.burst)
		c.handle(mux, "POST /efile/openapi/v2/file/merge", EndpointComputeMerge, c.merge)
		c.handle(mux, "GET /efile/openapi/v2/file/list", EndpointComputeList, c.listFiles)
		c.registerContainers(mux)
	}
	c.handle(mux, "GET /ac/openapi/v2/center", EndpointComputeCenter, c.center)
	c.handle(mux, "POST /efile/openapi/v2/file/upload", EndpointComputeUpload, c.upload)
	c.handle(mux, "GET /efile/openapi/v2/file/download", EndpointComputeDownload, c.download)
	c.handle(mux, "GET /hpc/openapi/v2/cluster", EndpointComputeCluster, c.cluster)
	c.handle(mux, "GET /hpc/openapi/v2/queuenames/users/{user}", EndpointComputeQueues, c.queues)
	if !c.cfg.Letter {
		c.handle(mux, "GET /hpc/openapi/v2/userquotas/queues", EndpointComputeLimits, c.queueLimits)
	}
	c.handle(mux, "POST /hpc/openapi/v2/apptemplates/{type}/{name}/job", EndpointComputeSubmit, c.submit)
	c.handle(mux, "GET /hpc/openapi/v2/jobs/{id}", EndpointComputeJob, c.job)
	if !c.cfg.Letter {
		c.registerPlatformJobs(mux)
	}
	c.mux = mux
	c.loadErr = c.load()
	return c
}

func defaultQueues() []simQueue {
	return []simQueue{
		{name: "debug", maxNodes: 2, maxPPN: 32, maxWall: 30 * time.Minute},
		{name: "normal", maxNodes: 16, maxPPN: 64, maxWall: 72 * time.Hour, maxGPUPN: 4},
		{name: "dcu", maxNodes: 4, maxPPN: 32, maxWall: 24 * time.Hour, maxDCUPN: 4, minDCUs: 1},
	}
}

// ServeHTTP serves /ac/openapi/v2/, /efile/openapi/v2/ and /hpc/openapi/v2/.
func (c *Compute) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// Faults returns the simulator's fault settings (endpoint names are the
// EndpointCompute* constants).
func (c *Compute) Faults() *Faults { return &c.faults }

// Counters returns what the simulator counted:
// "requests:<endpoint>:<status>" per answered request,
// "submits:<job name>" per accepted submission, "jobs:<phase>" per job
// that reached queued, running, succeeded, failed or vanished (as
// observed by a later request), and "bytes:compute.upload" for the file
// bytes received so far.
func (c *Compute) Counters() *Counters { return &c.counters }

// SubmitCount returns how many submissions of a job named jobName
// (GAP_JOB_NAME) were accepted: more than one means a job was paid twice.
func (c *Compute) SubmitCount(jobName string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.submits[jobName]
}

// Tokens returns every token the simulator has handed out, for tests that
// check a token never shows up where it must not.
func (c *Compute) Tokens() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.issued...)
}

// StateErr returns the error that reading cfg.StateFile met in NewCompute
// (nil when there was none or it was read); the simulator then started
// without the saved jobs.
func (c *Compute) StateErr() error { return c.loadErr }

// Root returns the directory holding the simulated file system.
func (c *Compute) Root() string { return c.root }

// Close removes the temporary directory NewCompute created, if any.
func (c *Compute) Close() error {
	if !c.ownRoot {
		return nil
	}
	return os.RemoveAll(c.root)
}

// handle registers h under pattern with the endpoint's faults and request
// counter around it.
func (c *Compute) handle(mux *http.ServeMux, pattern, endpoint string, h http.HandlerFunc) {
	mux.HandleFunc(pattern, c.counters.countRequests(endpoint, c.busyFirst(endpoint, c.faults.Wrap(endpoint, c.writeFaultError, h))))
}

// envelope is the code/msg/data wrapper of every JSON answer.
type envelope struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
	Data any    `json:"data"`
}

func writeOK(w http.ResponseWriter, data any) {
	writeJSON(w, http.StatusOK, envelope{Code: "0", Msg: "success", Data: data})
}

func writeEnvelopeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, envelope{Code: code, Msg: msg})
}

// writeFaultError is the body of an injected 429 or 5xx.
func (c *Compute) writeFaultError(w http.ResponseWriter, status int) {
	writeEnvelopeError(w, status, strconv.Itoa(status), "simulated "+http.StatusText(status))
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newToken returns a token for clusterID issued at now: random hex in
// Letter mode, a JWT-shaped token whose payload carries clusterId, user
// and expireTime (milliseconds, as a string) in platform mode. The
// signature part is random: only the simulator checks tokens, by value.
func (c *Compute) newToken(clusterID string, now time.Time) string {
	if c.cfg.Letter {
		return randomHex()
	}
	seg := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return seg(map[string]string{"alg": "HS256", "typ": "JWT"}) + "." +
		seg(map[string]string{
			"clusterId":  clusterID,
			"user":       c.clusterUser(),
			"expireTime": strconv.FormatInt(now.Add(c.cfg.TokenLifetime).UnixMilli(), 10),
		}) + "." + randomHex()
}

// tokenUsable reports whether cl's current token may serve another
// request: issued, not used up, and (platform mode) not expired.
func (c *Compute) tokenUsable(cl *simCluster, now time.Time) bool {
	return cl.token != "" && (c.cfg.TokenMaxUses <= 0 || cl.tokenUses < c.cfg.TokenMaxUses) &&
		(c.cfg.Letter || now.Before(cl.issuedAt.Add(c.cfg.TokenLifetime)))
}

// tokens answers the token form of compute-api.md (user, password,
// orgid).
func (c *Compute) tokens(w http.ResponseWriter, r *http.Request) {
	user, pass, org := r.Header.Get("user"), r.Header.Get("password"), r.Header.Get("orgid")
	if !credOK(c.cfg.User, user) || !credOK(c.cfg.Password, pass) || !credOK(c.cfg.OrgID, org) {
		writeEnvelopeError(w, http.StatusUnauthorized, ComputeCodeBadCredentials, "user, password or orgid is wrong")
		return
	}
	writeOK(w, c.issueTokens())
}

// akskTokens answers the AK/SK login (platform-evidence.md section 4):
// headers user, accessKey, timestamp (seconds) and signature, the
// lower-case hex HMAC-SHA256 keyed with the secret key over
// {"accessKey":"<ak>","timestamp":"<ts>","user":"<user>"}. A wrong one
// answers 10009 in an HTTP 200 envelope, as the platform does.
func (c *Compute) akskTokens(w http.ResponseWriter, r *http.Request) {
	user, ak, ts, sig := r.Header.Get("user"), r.Header.Get("accessKey"), r.Header.Get("timestamp"), r.Header.Get("signature")
	if user == "" || ak == "" || ts == "" || sig == "" {
		writeEnvelopeError(w, http.StatusOK, "10003", "user, accessKey, timestamp and signature are required")
		return
	}
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
		writeEnvelopeError(w, http.StatusOK, "10004", "timestamp must be seconds since the epoch")
		return
	}
	ok := credOK(c.cfg.User, user) && credOK(c.cfg.AccessKey, ak)
	if ok && c.cfg.SecretKey != "" {
		mac := hmac.New(sha256.New, []byte(c.cfg.SecretKey))
		b, _ := json.Marshal(struct {
			AccessKey string `json:"accessKey"`
			Timestamp string `json:"timestamp"`
			User      string `json:"user"`
		}{ak, ts, user})
		mac.Write(b)
		ok = hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(sig))
	}
	if !ok {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeCheckFailed, "check failed: unknown user or bad signature")
		return
	}
	writeOK(w, c.issueTokens())
}

// issueTokens lists every region with its current token, a new one where
// there is none, it is used up or expired, or (platform mode) half its
// lifetime has passed. In platform mode the list also holds the
// suspended region (token null) and the platform's own entry.
func (c *Compute) issueTokens() []map[string]any {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]map[string]any, 0, len(c.clusters)+1)
	for _, cl := range c.clusters {
		if cl.suspended {
			out = append(out, map[string]any{"clusterId": cl.id, "clusterName": cl.name, "token": nil})
			continue
		}
		stale := !c.cfg.Letter && !now.Before(cl.issuedAt.Add(c.cfg.TokenLifetime/2))
		if !c.tokenUsable(cl, now) || stale {
			cl.token, cl.tokenUses, cl.issuedAt = c.newToken(cl.id, now), 0, now
			c.issued = append(c.issued, cl.token)
		}
		out = append(out, map[string]any{"clusterId": cl.id, "clusterName": cl.name, "token": cl.token})
	}
	if !c.cfg.Letter {
		if c.platTok == "" {
			c.platTok = c.newToken("0", now)
			c.issued = append(c.issued, c.platTok)
		}
		out = append(out, map[string]any{"clusterId": "0", "clusterName": "ac", "token": c.platTok})
	}
	return out
}

// renewToken answers POST /ac/openapi/v2/tokens/next (platform mode,
// platform-evidence.md section 7): the token header's token, if it has
// not expired, is replaced by a new one of a full lifetime, the answer's
// data; an expired, replaced or unknown token answers 401: only a new
// login works then.
func (c *Compute) renewToken(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get("token")
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if tok != "" && tok == c.platTok {
		c.platTok = c.newToken("0", now)
		c.issued = append(c.issued, c.platTok)
		writeOK(w, c.platTok)
		return
	}
	for _, cl := range c.clusters {
		if tok != "" && tok == cl.token && c.tokenUsable(cl, now) {
			cl.token, cl.tokenUses, cl.issuedAt = c.newToken(cl.id, now), 0, now
			c.issued = append(c.issued, cl.token)
			writeOK(w, cl.token)
			return
		}
	}
	writeEnvelopeError(w, http.StatusUnauthorized, ComputeCodeBadToken, "token is missing, invalid or expired: log in again")
}

func credOK(want, got string) bool { return got != "" && (want == "" || want == got) }

// authorize checks the token header, counts one use, and returns the
// token's cluster; on failure it has answered: 401 for a missing,
// unknown, replaced, used-up or expired token; in platform mode the
// platform's own token gets 10001 from the center and 10008 elsewhere
// (HTTP 200).
func (c *Compute) authorize(w http.ResponseWriter, r *http.Request) (*simCluster, bool) {
	tok := r.Header.Get("token")
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clusters {
		if tok != "" && tok == cl.token && c.tokenUsable(cl, now) {
			cl.tokenUses++
			return cl, true
		}
	}
	if tok != "" && tok == c.platTok {
		if r.URL.Path == "/ac/openapi/v2/center" {
			writeEnvelopeError(w, http.StatusOK, ComputeCodePlatformInternal, "internal error")
		} else {
			writeEnvelopeError(w, http.StatusOK, ComputeCodeDenied, "permission denied")
		}
		return nil, false
	}
	writeEnvelopeError(w, http.StatusUnauthorized, ComputeCodeBadToken, "token is missing, invalid or expired")
	return nil, false
}

// baseURL is the address the center lists for efile and hpc.
func (c *Compute) baseURL(r *http.Request) string {
	if c.cfg.BaseURL != "" {
		return c.cfg.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// center answers the center call. efileUrls lists a disabled address
// before the simulator's own, and DeadURL (if set) first of all. In
// platform mode every service address ends in its segment (.../efile,
// .../hpc, .../ai) and aiUrls lists one; in Letter mode they are the bare
// address and aiUrls is empty.
func (c *Compute) center(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.authorize(w, r); !ok {
		return
	}
	base := c.baseURL(r)
	svc := func(u, segment string) string {
		if c.cfg.Letter {
			return u
		}
		return u + segment
	}
	efile := []map[string]string{
		{"nodeName": "efile-off", "enable": "false", "fastTransEnable": "false", "udpPort": "", "version": "v2", "url": "http://efile-disabled.invalid"},
		{"nodeName": "efile-1", "enable": "true", "fastTransEnable": "false", "udpPort": "", "version": "v2", "url": svc(base, "/efile")},
	}
	hpc := []map[string]string{{"enable": "true", "isManagerNode": "true", "version": "v2", "url": svc(base, "/hpc")}}
	ai := []map[string]string{}
	if !c.cfg.Letter {
		ai = append(ai, map[string]string{"enable": "true", "version": "v2", "url": base + "/ai"})
	}
	if c.cfg.DeadURL != "" {
		efile = append([]map[string]string{{"nodeName": "efile-dead", "enable": "true", "fastTransEnable": "false", "udpPort": "", "version": "v2", "url": svc(c.cfg.DeadURL, "/efile")}}, efile...)
		hpc = append([]map[string]string{{"enable": "true", "isManagerNode": "false", "version": "v2", "url": svc(c.cfg.DeadURL, "/hpc")}}, hpc...)
	}
	writeOK(w, map[string]any{
		"id":          1,
		"name":        "sim-center",
		"description": "simulated compute center",
		"clusterUserInfo": map[string]string{
			"userName": c.clusterUser(),
			"homePath": "/public/home/" + c.clusterUser(),
		},
		"ingressUrls":    []map[string]string{{"enable": "true", "isManagerNode": "true", "version": "v2", "url": base}},
		"efileUrls":      efile,
		"eshellUrls":     []map[string]string{},
		"hpcUrls":        hpc,
		"aiUrls":         ai,
		"eshellSshHosts": []map[string]string{},
	})
}

// clusterUser is the platform user of the center.
func (c *Compute) clusterUser() string { return cmp.Or(c.cfg.User, "simuser") }

// cluster answers the scheduler list of the token's cluster.
func (c *Compute) cluster(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok {
		return
	}
	writeOK(w, []map[string]any{{
		"id":             cl.schedID,
		"text":           cl.schedName,
		"JobManagerAddr": cl.managerAddr,
		"JobManagerType": cl.schedType,
		"JobManagerPort": "6817",
	}})
}

// queues answers the queues of the token's cluster for its user.
func (c *Compute) queues(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok {
		return
	}
	if user := r.PathValue("user"); user != c.clusterUser() {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "user_name "+strconv.Quote(user)+" is not a user of this cluster")
		return
	}
	c.writeQueues(w, r, cl)
}

// queueLimits answers GET .../userquotas/queues?strJobManagerID=: each
// queue's limits (platform-evidence.md section 7), as the user queues
// answer gives them.
func (c *Compute) queueLimits(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok {
		return
	}
	c.writeQueues(w, r, cl)
}

// writeQueues answers cl's queues with their limits (compute-api.md 2.4
// and queMinNodect); "-1" is a limit the queue does not set.
func (c *Compute) writeQueues(w http.ResponseWriter, r *http.Request, cl *simCluster) {
	if id := r.URL.Query().Get("strJobManagerID"); id != strconv.FormatInt(cl.schedID, 10) {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "strJobManagerID "+strconv.Quote(id)+" is not a scheduler of this cluster")
		return
	}
	limit := func(n int) string {
		if n <= 0 {
			return "-1"
		}
		return strconv.Itoa(n)
	}
	out := make([]map[string]string, 0, len(cl.queues))
	for _, q := range cl.queues {
		out = append(out, map[string]string{
			"queueName": q.name, "id": q.name, "text": q.name,
			"queNodes": strconv.Itoa(q.maxNodes), "queFreeNodes": "8", "queNcpus": "1024", "queFreeNcpus": "512",
			"queMaxNcpus": strconv.Itoa(q.maxNodes * q.maxPPN), "queMaxNgpus": limit(q.maxNodes * q.maxGPUPN),
			"queMaxNdcus": limit(q.maxNodes * q.maxDCUPN), "queMaxNmlus": "-1",
			"queMinNodect": "1", "queMaxNodect": strconv.Itoa(q.maxNodes), "queMaxPPN": strconv.Itoa(q.maxPPN),
			"queMaxGpuPN": limit(q.maxGPUPN), "queMaxDcuPN": limit(q.maxDCUPN), "queMaxWalltime": formatHMS(q.maxWall),
			"queChargeRate": "1.0", "aclHosts": "node01,node02",
		})
	}
	writeOK(w, out)
}
