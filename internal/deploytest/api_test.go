package deploytest

import (
	"strings"
	"testing"
)

// TestChartServesTheAPI: api.enabled sets SLUICE_API_ADDR on its port,
// opens that port on the worker as "api" and, with api.service.enabled,
// a Service targets it; by default none of these is rendered.
func TestChartServesTheAPI(t *testing.T) {
	off := render(t)
	if _, set := off.configMap.Data["SLUICE_API_ADDR"]; set {
		t.Error("SLUICE_API_ADDR is set by default; the API is off unless asked for")
	}
	r := render(t, "--set", "api.enabled=true", "--set", "api.port=8443", "--set", "api.service.enabled=true")
	r.checkWorker(t)
	r.checkWiring(t)
	if got := r.configMap.Data["SLUICE_API_ADDR"]; got != ":8443" {
		t.Errorf("SLUICE_API_ADDR = %q, want :8443", got)
	}
	found := false
	for _, p := range r.deployment.Spec.Template.Spec.Containers[0].Ports {
		found = found || (p.Name == "api" && p.ContainerPort == 8443)
	}
	if !found {
		t.Error("the worker has no container port api 8443")
	}
	found = false
	for _, s := range r.services {
		if strings.HasSuffix(s.Name, "-api") {
			found = len(s.Spec.Ports) == 1 && s.Spec.Ports[0].TargetPort.String() == "api"
		}
	}
	if !found {
		t.Error("no Service -api targets the worker's api port")
	}
}
