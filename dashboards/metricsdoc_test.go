package dashboards

import (
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// docRow is a row of a metrics table in docs/metrics.md: | `name` | type | ...
var docRow = regexp.MustCompile("^\\| `(eddy_[a-z0-9_]+)` \\| ([a-z]+) \\|")

// TestMetricsDocListsEveryFamily: docs/metrics.md has one row for every
// eddy_* family an app's registry exports, with its type, and no row for a
// family that is not exported, so the reference cannot drift from the code.
func TestMetricsDocListsEveryFamily(t *testing.T) {
	text, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, line := range strings.Split(string(text), "\n") {
		m := docRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := documented[m[1]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", m[1])
		}
		documented[m[1]] = m[2]
	}
	types := map[dto.MetricType]string{
		dto.MetricType_COUNTER: "counter", dto.MetricType_GAUGE: "gauge", dto.MetricType_HISTOGRAM: "histogram",
		dto.MetricType_SUMMARY: "summary",
	}
	exported := exportedByEddy(t)
	n := 0
	for name, typ := range exported {
		if !strings.HasPrefix(name, "eddy_") {
			continue
		}
		n++
		doc, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("docs/metrics.md does not list %s (a %s)", name, types[typ])
		case doc != types[typ]:
			t.Errorf("docs/metrics.md says %s is a %s; it is a %s", name, doc, types[typ])
		}
	}
	for name := range documented {
		if _, ok := exported[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which eddy does not export", name)
		}
	}
	if n == 0 {
		t.Fatal("the registry exported no eddy_* family: the check checked nothing")
	}
	t.Logf("docs/metrics.md lists the %d eddy_* families eddy exports", n)
}
