package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/internal/buildinfo"
)

// BuildInfo exports in as the constant gauge
// sluice_build_info{version,commit,go_version} 1, so a dashboard can tell
// which build each worker runs. Call it once.
func (m *Metrics) BuildInfo(in buildinfo.Info) {
	if m == nil {
		return
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_build_info", Help: "Always 1; its labels name the running build (module version, VCS commit, Go version).",
		ConstLabels: prometheus.Labels{"version": in.Version, "commit": in.Commit, "go_version": in.GoVersion},
	})
	g.Set(1)
	m.reg.MustRegister(g)
}
