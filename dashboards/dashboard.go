// Package dashboards holds eddy's Grafana dashboard (eddy.json), for an
// operator to import or a program to serve. Its tests check that every
// PromQL expression of the dashboard parses and reads only metrics eddy
// exports, so that a typo or a renamed family fails a test before a user
// sees an empty chart; the checker lives in the tests, which are all it
// serves.
package dashboards

import _ "embed"

//go:embed eddy.json
var eddyJSON []byte

// Eddy returns the dashboard of an eddy app (eddy.json): import it in
// Grafana 10 or later and pick the Prometheus data source that scrapes the
// app's /metrics.
func Eddy() []byte { return append([]byte(nil), eddyJSON...) }
