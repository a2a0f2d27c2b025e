// Package deploytest checks what the repository ships for running sluice
// elsewhere: the Helm chart (deploy/helm/sluice), rendered by the real Helm
// under `helm lint --strict` and `helm template` for the default values and
// every example values file, each object decoded strictly into its
// Kubernetes type; and the Grafana dashboard, whose every query must parse
// as PromQL and name only metrics the worker exports.
//
// It is a Go module of its own, so that Helm's Kubernetes types and
// Prometheus's PromQL parser stay out of the worker's go.mod; make test runs
// it after the main module.
package deploytest
