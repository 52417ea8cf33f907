package eddy

import "github.com/prometheus/client_golang/prometheus"

// Registry is the app's Prometheus registry, which Handler serves on
// /metrics: register your own collectors there to serve them beside
// eddy's. It is the app's own (no global registry), so several apps in one
// process keep their metrics apart. docs/metrics.md lists the families
// eddy exports.
func (a *App) Registry() *prometheus.Registry { return a.metrics.Registry() }
