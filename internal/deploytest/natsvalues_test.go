package deploytest

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"sigs.k8s.io/yaml"
)

const natsValuesPath = "deploy/helm/examples/nats-cluster-tls.values.yaml"

// TestNATSExampleValues checks the values for the official NATS chart: a
// three-server JetStream cluster, TLS for clients and routes, and users
// whose permissions are those of config/nats/users.conf, each password
// taken from a Secret through the server's environment.
func TestNATSExampleValues(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), natsValuesPath))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled  bool `json:"enabled"`
				Replicas int  `json:"replicas"`
				TLS      struct {
					Enabled    bool           `json:"enabled"`
					SecretName string         `json:"secretName"`
					Merge      map[string]any `json:"merge"`
				} `json:"tls"`
			} `json:"cluster"`
			NATS struct {
				TLS struct {
					Enabled    bool   `json:"enabled"`
					SecretName string `json:"secretName"`
				} `json:"tls"`
			} `json:"nats"`
			JetStream struct {
				Enabled bool `json:"enabled"`
			} `json:"jetstream"`
			Monitor struct {
				Enabled bool `json:"enabled"`
				Port    int  `json:"port"`
			} `json:"monitor"`
			Merge struct {
				Authorization struct {
					Users []map[string]any `json:"users"`
				} `json:"authorization"`
			} `json:"merge"`
		} `json:"config"`
		Container struct {
			Env map[string]struct {
				ValueFrom struct {
					SecretKeyRef struct {
						Name string `json:"name"`
						Key  string `json:"key"`
					} `json:"secretKeyRef"`
				} `json:"valueFrom"`
			} `json:"env"`
		} `json:"container"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", natsValuesPath, err)
	}
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 || !c.JetStream.Enabled {
		t.Errorf("want a three-server JetStream cluster: cluster %v, replicas %d, jetstream %v", c.Cluster.Enabled, c.Cluster.Replicas, c.JetStream.Enabled)
	}
	if !c.NATS.TLS.Enabled || c.NATS.TLS.SecretName == "" {
		t.Error("clients do not need TLS")
	}
	if !c.Cluster.TLS.Enabled || c.Cluster.TLS.Merge["verify"] != true || c.Cluster.TLS.Merge["ca_file"] == nil {
		t.Error("routes are not mutual TLS (cluster.tls with ca_file and verify)")
	}
	if !c.Monitor.Enabled || c.Monitor.Port != 8222 {
		t.Error("the monitoring port (KEDA's /jsz) is not 8222")
	}

	// The users as users.conf defines them, passwords aside.
	for _, p := range []string{"PRODUCER_PASSWORD", "WORKER_PASSWORD", "ADMIN_PASSWORD"} {
		t.Setenv(p, "from-the-environment")
	}
	usersConf, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "nats", "users.conf"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := conf.Parse(string(usersConf))
	if err != nil {
		t.Fatalf("config/nats/users.conf: %v", err)
	}
	want := map[string]any{}
	for _, u := range parsed["authorization"].(map[string]any)["users"].([]any) {
		um := u.(map[string]any)
		want[um["user"].(string)] = normalize(um["permissions"])
	}
	got := map[string]any{}
	ref := regexp.MustCompile(`^<< \$([A-Z_]+) >>$`)
	for _, u := range c.Merge.Authorization.Users {
		name := fmt.Sprint(u["user"])
		got[name] = normalize(u["permissions"])
		m := ref.FindStringSubmatch(fmt.Sprint(u["password"]))
		if m == nil {
			t.Errorf("user %s: password %q is not a << $VARIABLE >> of the server's environment", name, u["password"])
			continue
		}
		if e, ok := v.Container.Env[m[1]]; !ok || e.ValueFrom.SecretKeyRef.Name == "" {
			t.Errorf("user %s: %s is not read from a Secret into the server's environment", name, m[1])
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the users differ from config/nats/users.conf:\n got %v\nwant %v", got, want)
	}
	if len(want) != 4 {
		t.Errorf("users.conf has %d users, want producer, worker, team-acme and admin", len(want))
	}
}

// normalize turns the NATS parser's and the YAML decoder's values into one
// form: maps of strings, lists of strings, booleans.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case nil:
		return nil
	default:
		return fmt.Sprint(x)
	}
}

// TestSluiceExampleBesideNATS: the cluster example's workers connect as the
// worker user to every server of the NATS release over TLS, at R3, and KEDA
// reads the servers through the headless service (the scaler asks each
// server as <server name>.<endpoint host>).
func TestSluiceExampleBesideNATS(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "helm", "examples", "sluice-cluster-tls.values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		NATS struct {
			URLs     []string `json:"urls"`
			User     string   `json:"user"`
			Replicas int      `json:"replicas"`
			TLS      struct {
				CASecret struct {
					Name string `json:"name"`
				} `json:"caSecret"`
			} `json:"tls"`
		} `json:"nats"`
		KEDA struct {
			Enabled            bool   `json:"enabled"`
			MonitoringEndpoint string `json:"monitoringEndpoint"`
		} `json:"keda"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if v.NATS.User != "worker" || v.NATS.Replicas != 3 || v.NATS.TLS.CASecret.Name == "" {
		t.Errorf("want user worker, R3 and the servers' CA: %+v", v.NATS)
	}
	if len(v.NATS.URLs) != 3 {
		t.Errorf("want the three servers in nats.urls, got %v", v.NATS.URLs)
	}
	for i, u := range v.NATS.URLs {
		p, err := url.Parse(u)
		if err != nil || p.Hostname() != fmt.Sprintf("nats-%d.nats-headless.nats.svc.cluster.local", i) {
			t.Errorf("nats.urls[%d] = %s, not server %d of the NATS release", i, u, i)
		}
	}
	host, _, _ := strings.Cut(v.KEDA.MonitoringEndpoint, ":")
	if !v.KEDA.Enabled || host != "nats-headless.nats.svc.cluster.local" {
		t.Errorf("KEDA should read the headless service's monitoring port, not %q", v.KEDA.MonitoringEndpoint)
	}
}
