package dashboards

import (
	"slices"
	"strings"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`rate(eddy_records_consumed_total[5m])`, []string{"eddy_records_consumed_total"}},
		{`sum by (task, topic) (rate(a_total{instance=~"$instance", job="x"}[$__rate_interval]))`, []string{"a_total"}},
		{`sum(rate(a_total[1m])) without (le) / on (task) group_left (store) b`, []string{"a_total", "b"}},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket{task!="0_1"}[5m])))`, []string{"h_bucket"}},
		{`h_sum / h_count`, []string{"h_sum", "h_count"}},
		{`a > bool 1e-3 and b unless c or d`, []string{"a", "b", "c", "d"}},
		{`a offset 5m + b offset -1h30m`, []string{"a", "b"}},
		{`a @ start() - a @ 1609746000`, []string{"a"}},
		{`{__name__="by_name", task="0_0"}`, []string{"by_name"}},
		{`{"utf8.name", task="0_0"}`, []string{"utf8.name"}},
		{`label_replace(a, "dst", "$1", "src", "(.*)")`, []string{"a"}},
		{`max_over_time(rate(a[5m])[1h:1m])`, []string{"a"}},
		{`a{l="with } and \" inside"} * 0x1F + Inf - NaN`, []string{"a"}},
		{`# a comment naming not_a_metric
		  b`, []string{"b"}},
		{`sum(a) by (sum, rate)`, []string{"a"}},
		{`${datasource_metric}`, nil},
		{`on_metric + by_metric`, []string{"on_metric", "by_metric"}},
	} {
		got, err := MetricNames(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: names %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestMetricNamesErrors(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`rat(a[5m])`, "unknown function rat"},
		{`a{l="x}`, "unclosed string"},
		{`a{l="x"`, "unclosed {"},
		{`rate(a[5m)`, "unclosed ["},
		{`a{l}`, `operator "" after label l`},
		{`a{l=x}`, "is not a string"},
	} {
		_, err := MetricNames(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.expr, err, tc.want)
		}
	}
}
