package deploytest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/console"
)

const chartDir = "deploy/helm/sluice"

// secretEnv are the variables the chart reads from the Secret and from
// nowhere else: the worker's secrets, the AWS chain's keys and the NATS
// password that SLUICE_NATS_URL refers to.
var secretEnv = []string{
	"SLUICE_MEDIA_API_KEY", "SLUICE_COMPUTE_PASSWORD", "SLUICE_COMPUTE_ACCESS_KEY", "SLUICE_COMPUTE_SECRET_KEY",
	"SLUICE_CONSOLE_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "NATS_PASSWORD",
}

// helmBinary finds Helm: $HELM, else helm on PATH, else bin/helm (make
// helm). Without it the chart tests skip, except in CI (CI set), where
// .ci/run builds it and its absence is a failure.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if h, err := exec.LookPath("helm"); err == nil {
		return h
	}
	if h := filepath.Join(repoRoot(t), "bin", "helm"); fileExists(h) {
		return h
	}
	if os.Getenv("CI") != "" {
		t.Fatal("helm not found (HELM, PATH, bin/helm): CI builds it with make helm")
	}
	t.Skip("helm not found (HELM, PATH or bin/helm): run make helm to render the chart")
	return ""
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// helm runs Helm with its own home directories under t.TempDir, so no
// repository list or cache of the machine's takes part.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := helmBinary(t)
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// valuesFiles are the chart's cases: its defaults ("") and every example
// values file for it.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "helm", "examples", "sluice-*.values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example values files for the chart (%v)", err)
	}
	return append([]string{""}, files...)
}

func TestChartLintAndTemplate(t *testing.T) {
	for _, values := range valuesFiles(t) {
		name := "defaults"
		args := []string{}
		if values != "" {
			name = filepath.Base(values)
			args = []string{"-f", values}
		}
		t.Run(name, func(t *testing.T) {
			if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, args...)...); err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
			r := render(t, args...)
			r.checkWorker(t)
			r.checkSecrets(t, nil)
			r.checkWiring(t)
		})
	}
}

// TestChartSecretValuesOnlyInSecret gives every secret a recognisable value
// through the chart-made Secret and proves that no other object carries it.
func TestChartSecretValuesOnlyInSecret(t *testing.T) {
	args := []string{"--set", "secret.create=true", "--set", "nats.user=worker", "--set", "compute.user=sluice"}
	values := map[string]string{}
	for i, name := range secretEnv {
		v := fmt.Sprintf("sentinel-%d-value", i)
		values[name] = v
		args = append(args, "--set", "secret.values."+name+"="+v)
	}
	r := render(t, args...)
	if len(r.secrets) != 1 {
		t.Fatalf("rendered %d Secrets, want the chart's one", len(r.secrets))
	}
	for name, v := range values {
		if r.secrets[0].StringData[name] != v {
			t.Errorf("Secret lacks %s", name)
		}
	}
	r.checkSecrets(t, values)
	r.checkWorker(t)
}

// TestChartRefusesSecretsAsSettings: a secret given as a plain setting
// (env) or an unknown key in the chart's Secret fails the render.
func TestChartRefusesSecretsAsSettings(t *testing.T) {
	for _, tc := range []struct{ set, name string }{
		{"env.SLUICE_MEDIA_API_KEY=k", "SLUICE_MEDIA_API_KEY"},
		{"env.SLUICE_CONSOLE_TOKEN=k", "SLUICE_CONSOLE_TOKEN"},
		{"env.AWS_SECRET_ACCESS_KEY=k", "AWS_SECRET_ACCESS_KEY"},
		{"secret.create=true,secret.values.SLUICE_S3_BUCKET=b", "SLUICE_S3_BUCKET"},
	} {
		set, name := tc.set, tc.name
		out, err := helm(t, "template", "sluice", chartDir, "--set", set)
		switch {
		case err == nil:
			t.Errorf("--set %s rendered; want a refusal", set)
		case !strings.Contains(out, name):
			t.Errorf("--set %s refused without naming %s:\n%s", set, name, out)
		default:
			t.Logf("--set %s: %s", set, errorLine(out))
		}
	}
}

func errorLine(out string) string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "Error:") {
			return strings.TrimSpace(line)
		}
	}
	return strings.TrimSpace(out)
}

// rendered holds the objects of one `helm template`, each decoded strictly.
type rendered struct {
	docs           []renderedDoc
	deployment     *appsv1.Deployment
	configMap      *corev1.ConfigMap // the worker's settings
	models         *corev1.ConfigMap // the model catalog (modelCatalog)
	dashboard      *corev1.ConfigMap
	secrets        []*corev1.Secret
	services       []*corev1.Service
	pdb            *policyv1.PodDisruptionBudget
	ingress        *networkingv1.Ingress
	serviceMonitor *serviceMonitor
	scaledObject   *scaledObject
}

type renderedDoc struct {
	kind string
	raw  []byte
}

// typeMeta is read first to choose the type a document decodes into.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes; a field outside it fails the strict decoding.
type serviceMonitor struct {
	typeMeta   `json:",inline"`
	ObjectMeta metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// scaledObject is the part of keda.sh/v1alpha1 ScaledObject the chart
// writes.
type scaledObject struct {
	typeMeta   `json:",inline"`
	ObjectMeta metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval int32 `json:"pollingInterval"`
		CooldownPeriod  int32 `json:"cooldownPeriod"`
		MinReplicaCount int32 `json:"minReplicaCount"`
		MaxReplicaCount int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func render(t *testing.T, args ...string) *rendered {
	t.Helper()
	out, err := helm(t, append([]string{"template", "sluice", chartDir, "--namespace", "sluice"}, args...)...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	r := &rendered{}
	for _, doc := range docSeparator.Split(out, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm typeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("a rendered document is not YAML: %v\n%s", err, doc)
		}
		r.docs = append(r.docs, renderedDoc{kind: tm.Kind, raw: []byte(doc)})
		strict := func(into any) {
			t.Helper()
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s %s does not decode strictly: %v\n%s", tm.APIVersion, tm.Kind, err, doc)
			}
		}
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			if r.deployment != nil {
				t.Fatal("more than one Deployment")
			}
			r.deployment = &appsv1.Deployment{}
			strict(r.deployment)
		case "v1 ConfigMap":
			cm := &corev1.ConfigMap{}
			strict(cm)
			switch {
			case strings.HasSuffix(cm.Name, "-dashboard"):
				r.dashboard = cm
			case strings.HasSuffix(cm.Name, "-models"):
				r.models = cm
			default:
				r.configMap = cm
			}
		case "v1 Secret":
			s := &corev1.Secret{}
			strict(s)
			r.secrets = append(r.secrets, s)
		case "v1 Service":
			s := &corev1.Service{}
			strict(s)
			r.services = append(r.services, s)
		case "v1 ServiceAccount":
			strict(&corev1.ServiceAccount{})
		case "policy/v1 PodDisruptionBudget":
			r.pdb = &policyv1.PodDisruptionBudget{}
			strict(r.pdb)
		case "networking.k8s.io/v1 Ingress":
			r.ingress = &networkingv1.Ingress{}
			strict(r.ingress)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			r.serviceMonitor = &serviceMonitor{}
			strict(r.serviceMonitor)
		case "keda.sh/v1alpha1 ScaledObject":
			r.scaledObject = &scaledObject{}
			strict(r.scaledObject)
		default:
			t.Fatalf("the chart rendered %s %s, which this test does not decode", tm.APIVersion, tm.Kind)
		}
	}
	if r.deployment == nil || r.configMap == nil {
		t.Fatal("the chart rendered no Deployment or no settings ConfigMap")
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// workerVariables are the SLUICE_* variables the worker reads: the
// envconfig names of config.Config's fields.
func workerVariables() map[string]bool {
	vars := map[string]bool{}
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if name := f.Tag.Get("envconfig"); name != "" && f.Tag.Get("ignored") != "true" {
			vars[config.Prefix+"_"+name] = true
		}
	}
	return vars
}

func (r *rendered) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := r.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "worker" {
		t.Fatalf("want the one container worker, got %d", len(cs))
	}
	return cs[0]
}

// environment is what the worker's process sees: the ConfigMap's settings,
// then the container's own env (which wins), with the kubelet's $(VAR)
// expansion done. A secret has the value of the chart's Secret where it
// made one; an optional key of a Secret the operator manages is taken as
// absent, a required one as set.
func (r *rendered) environment(t *testing.T) map[string]string {
	t.Helper()
	c := r.container(t)
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || from.ConfigMapRef.Name != r.configMap.Name {
			t.Fatalf("envFrom names something other than the settings ConfigMap: %+v", from)
		}
		for k, v := range r.configMap.Data {
			env[k] = v
		}
	}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if v, ok := r.secretValue(ref.Name, ref.Key); ok {
				env[e.Name] = v
			} else if ref.Optional == nil || !*ref.Optional {
				env[e.Name] = "placeholder"
			}
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env[e.Name] = "sluice-0"
		default:
			env[e.Name] = expand.ReplaceAllStringFunc(e.Value, func(ref string) string {
				return env[expand.FindStringSubmatch(ref)[1]]
			})
		}
	}
	return env
}

// secretValue is key of the rendered Secret name, if the chart made it.
func (r *rendered) secretValue(name, key string) (string, bool) {
	for _, s := range r.secrets {
		if s.Name == name {
			v, ok := s.StringData[key]
			return v, ok
		}
	}
	return "", false
}

func (r *rendered) checkWorker(t *testing.T) {
	t.Helper()
	c := r.container(t)
	spec := r.deployment.Spec.Template.Spec
	// The ops port first; the HTTP API's, when api.enabled, after it.
	if len(c.Ports) < 1 || len(c.Ports) > 2 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 9090 ||
		len(c.Ports) == 2 && c.Ports[1].Name != "api" {
		t.Errorf("ports %+v, want http on 9090", c.Ports)
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe missing or not HTTP", name)
			return
		}
		if p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe asks %s on %s, want %s on http", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")

	env := r.environment(t)
	if env["SLUICE_HTTP_ADDR"] != ":9090" {
		t.Errorf("SLUICE_HTTP_ADDR %q, want :9090 (the probes' port)", env["SLUICE_HTTP_ADDR"])
	}
	shutdown, err := time.ParseDuration(env["SLUICE_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatalf("SLUICE_SHUTDOWN_TIMEOUT: %v", err)
	}
	if spec.TerminationGracePeriodSeconds == nil || time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %v is not longer than SLUICE_SHUTDOWN_TIMEOUT %v", spec.TerminationGracePeriodSeconds, shutdown)
	}

	// Every SLUICE_* variable the chart sets is one the worker reads; the
	// others are the AWS chain's and the NATS password.
	known := workerVariables()
	for name := range env {
		if strings.HasPrefix(name, config.Prefix+"_") {
			if !known[name] {
				t.Errorf("the chart sets %s, which the worker does not read", name)
			}
		} else if !slices.Contains(secretEnv, name) {
			t.Errorf("the chart sets %s, which is neither the worker's nor a secret it wires", name)
		}
	}

	// The worker accepts the settings: the environment parses and
	// validates as it would in the pod (files named by the TLS, creds and
	// model catalog variables excepted, which exist only there; the
	// catalog's is checked by TestChartMountsModelCatalog).
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.Parse()
	if err != nil {
		t.Fatalf("the worker cannot parse the chart's settings: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		for line := range strings.Lines(err.Error()) {
			if !(strings.Contains(line, "SLUICE_NATS_") || strings.Contains(line, "SLUICE_MEDIA_MODELS")) || !strings.Contains(line, "/etc/sluice/") {
				t.Errorf("the worker refuses the chart's settings: %s", strings.TrimSpace(line))
			}
		}
	}
	if cfg.ShutdownTimeout != shutdown {
		t.Errorf("the worker reads SLUICE_SHUTDOWN_TIMEOUT as %v, the chart meant %v", cfg.ShutdownTimeout, shutdown)
	}

	// A file the settings name is mounted from a Secret.
	for _, v := range []string{"SLUICE_NATS_CREDS", "SLUICE_NATS_TLS_CA", "SLUICE_NATS_TLS_CERT", "SLUICE_NATS_TLS_KEY"} {
		path, ok := env[v]
		if !ok {
			continue
		}
		if !mountedFromSecret(spec, c, path) {
			t.Errorf("%s=%s is not in a volume mounted from a Secret", v, path)
		}
	}
}

func mountedFromSecret(spec corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return true
			}
		}
	}
	return false
}

// checkSecrets: each secret comes from a secretKeyRef and from nowhere
// else; no ConfigMap holds one, no env literal carries one, and
// SLUICE_NATS_URL carries a password only as $(NATS_PASSWORD). With values
// (secret name to value), no object but a Secret contains any of them.
func (r *rendered) checkSecrets(t *testing.T, values map[string]string) {
	t.Helper()
	c := r.container(t)
	for _, name := range secretEnv {
		if _, ok := r.configMap.Data[name]; ok {
			t.Errorf("the settings ConfigMap holds the secret %s", name)
		}
	}
	for _, e := range c.Env {
		if !slices.Contains(secretEnv, e.Name) {
			continue
		}
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s is not read from a Secret", e.Name)
		}
	}
	for _, e := range c.Env {
		if e.Name != "SLUICE_NATS_URL" {
			continue
		}
		for _, u := range strings.Split(e.Value, ",") {
			at := strings.LastIndex(u, "@")
			if at < 0 {
				continue
			}
			userinfo := u[strings.Index(u, "://")+3 : at]
			if _, pw, ok := strings.Cut(userinfo, ":"); ok && pw != "$(NATS_PASSWORD)" {
				t.Errorf("SLUICE_NATS_URL carries a password literally: %s", u[:at])
			}
		}
	}
	for _, doc := range r.docs {
		if doc.kind == "Secret" {
			continue
		}
		for name, v := range values {
			if bytes.Contains(doc.raw, []byte(v)) {
				t.Errorf("a %s carries the value of %s", doc.kind, name)
			}
		}
	}
}

// checkWiring: the objects refer to each other as they must.
func (r *rendered) checkWiring(t *testing.T) {
	t.Helper()
	podLabels := r.deployment.Spec.Template.Labels
	selects := func(sel map[string]string, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !selects(r.deployment.Spec.Selector.MatchLabels, podLabels) {
		t.Error("the Deployment's selector does not match its pods")
	}
	if r.pdb == nil {
		t.Error("no PodDisruptionBudget")
	} else if !selects(r.pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Error("the PodDisruptionBudget does not select the workers")
	}
	services := map[string]*corev1.Service{}
	for _, s := range r.services {
		services[s.Name] = s
		if !selects(s.Spec.Selector, podLabels) {
			t.Errorf("Service %s does not select the workers", s.Name)
		}
		want := "http" // the ops port; the API's own Service targets its port
		if strings.HasSuffix(s.Name, "-api") {
			want = "api"
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.String() != want {
				t.Errorf("Service %s port %s targets %s, not %s", s.Name, p.Name, p.TargetPort.String(), want)
			}
		}
	}
	if sm := r.serviceMonitor; sm != nil {
		found := false
		for _, s := range r.services {
			found = found || selects(sm.Spec.Selector.MatchLabels, s.Labels)
		}
		if !found {
			t.Error("the ServiceMonitor selects no Service of the chart")
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v, want http /metrics", sm.Spec.Endpoints)
		}
	}
	if ing := r.ingress; ing != nil {
		for _, rule := range ing.Spec.Rules {
			for _, p := range rule.HTTP.Paths {
				if p.Path != console.Prefix {
					t.Errorf("the Ingress routes %s; want the console's %s alone", p.Path, console.Prefix)
				}
				if services[p.Backend.Service.Name] == nil {
					t.Errorf("the Ingress routes to Service %s, which the chart does not make", p.Backend.Service.Name)
				}
			}
		}
	}
	if r.dashboard != nil {
		want, err := os.ReadFile(filepath.Join(repoRoot(t), dashboardPath))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(r.dashboard.Data["sluice.json"]) != strings.TrimSpace(string(want)) {
			t.Errorf("the dashboard ConfigMap differs from %s", dashboardPath)
		}
	}
	if so := r.scaledObject; so != nil {
		r.checkScaledObject(t, so)
	}
}

// kedaMetadata are the nats-jetstream trigger's metadata keys (KEDA's
// pkg/scalers/nats_jetstream_scaler.go).
var kedaMetadata = map[string]func(string) error{
	"natsServerMonitoringEndpoint": nonEmpty,
	"account":                      nonEmpty,
	"stream":                       nonEmpty,
	"consumer":                     nonEmpty,
	"lagThreshold":                 func(s string) error { _, err := strconv.ParseInt(s, 10, 64); return err },
	"activationLagThreshold":       func(s string) error { _, err := strconv.ParseInt(s, 10, 64); return err },
	"useHttps":                     func(s string) error { _, err := strconv.ParseBool(s); return err },
}

func nonEmpty(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	return nil
}

func (r *rendered) checkScaledObject(t *testing.T, so *scaledObject) {
	t.Helper()
	if r.deployment.Spec.Replicas != nil {
		t.Error("the Deployment sets replicas although KEDA scales it")
	}
	ref := so.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != r.deployment.Name {
		t.Errorf("the ScaledObject scales %+v, not the Deployment %s", ref, r.deployment.Name)
	}
	kinds := strings.Split(r.configMap.Data["SLUICE_KINDS"], ",")
	var consumers []string
	for _, tr := range so.Spec.Triggers {
		if tr.Type != "nats-jetstream" {
			t.Errorf("trigger type %s", tr.Type)
		}
		for k, v := range tr.Metadata {
			check, ok := kedaMetadata[k]
			if !ok {
				t.Errorf("trigger %s: KEDA's nats-jetstream scaler has no %s", tr.Name, k)
			} else if err := check(v); err != nil {
				t.Errorf("trigger %s: %s=%q: %v", tr.Name, k, v, err)
			}
		}
		if tr.Metadata["stream"] != "SLUICE_JOBS" {
			t.Errorf("trigger %s reads stream %s", tr.Name, tr.Metadata["stream"])
		}
		consumers = append(consumers, tr.Metadata["consumer"])
	}
	var want []string
	for _, k := range kinds {
		want = append(want, "sluice-"+k)
	}
	if !slices.Equal(consumers, want) {
		t.Errorf("triggers read consumers %v, want one per kind served: %v", consumers, want)
	}
	if so.Spec.MinReplicaCount < 1 {
		t.Log("minReplicaCount 0: no worker answers cancel requests while scaled to zero")
	}
}

// TestExamplesSetTheirUpstreams: every example values file gives the
// upstream address of each kind its workers serve, which a worker needs
// to start (SLUICE_MEDIA_BASE_URL for video and speech,
// SLUICE_COMPUTE_BASE_URL for compute and container).
func TestExamplesSetTheirUpstreams(t *testing.T) {
	for _, values := range valuesFiles(t)[1:] {
		t.Run(filepath.Base(values), func(t *testing.T) {
			r := render(t, "-f", values)
			env := r.configMap.Data
			kinds := env["SLUICE_KINDS"]
			for _, need := range []struct{ kinds, name string }{
				{"video speech", "SLUICE_MEDIA_BASE_URL"}, {"compute container", "SLUICE_COMPUTE_BASE_URL"},
			} {
				for _, k := range strings.Fields(need.kinds) {
					if strings.Contains(kinds, k) && env[need.name] == "" {
						t.Errorf("serves %s (SLUICE_KINDS=%s) but sets no %s", k, kinds, need.name)
					}
				}
			}
		})
	}
}
