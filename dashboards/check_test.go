package dashboards

// The dashboard check that the tests run: the PromQL expressions of a
// dashboard, and the metrics they read against what eddy exports.

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Expr is a PromQL expression of a dashboard and where it is.
type Expr struct {
	Where string // "panel \"Commit latency\" target A", "variable instance"
	Expr  string
}

type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

type variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// labelValues is Grafana's label_values(metric, label) (or
// label_values(label), which names no metric); queryResult its
// query_result(expr).
var (
	labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)
	labelOnly   = regexp.MustCompile(`^\s*label_values\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
)

// Expressions returns every PromQL expression of a dashboard: the targets
// of its panels (rows' included) and its query variables.
func Expressions(dashboardJSON []byte) ([]Expr, error) {
	var d dashboard
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("dashboards: not a dashboard: %w", err)
	}
	var out []Expr
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) != "" {
					out = append(out, Expr{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: t.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				return nil, fmt.Errorf("dashboards: variable %s: query is neither a string nor an object: %w", v.Name, err)
			}
			q = obj.Query
		}
		switch {
		case labelOnly.MatchString(q):
			continue
		case labelValues.MatchString(q):
			q = labelValues.FindStringSubmatch(q)[1]
		case queryResult.MatchString(q):
			q = queryResult.FindStringSubmatch(q)[1]
		}
		out = append(out, Expr{Where: "variable " + v.Name, Expr: q})
	}
	return out, nil
}

// Check returns an error naming every expression of the dashboard that
// does not parse or that reads a metric absent from exported (families by
// name, as a registry gathers them). A histogram family h is read as
// h_bucket, h_sum and h_count, a summary as h_sum and h_count. A
// dashboard without expressions is an error too: it checks nothing.
func Check(dashboardJSON []byte, exported map[string]dto.MetricType) error {
	exprs, err := Expressions(dashboardJSON)
	if err != nil {
		return err
	}
	if len(exprs) == 0 {
		return errors.New("dashboards: the dashboard has no PromQL expression")
	}
	var errs []error
	for _, e := range exprs {
		names, err := MetricNames(e.Expr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Where, err))
			continue
		}
		if len(names) == 0 {
			errs = append(errs, fmt.Errorf("%s: %q reads no metric", e.Where, e.Expr))
		}
		for _, n := range names {
			if !Exported(n, exported) {
				errs = append(errs, fmt.Errorf("%s: %s is not a metric eddy exports (%s)", e.Where, n, e.Expr))
			}
		}
	}
	return errors.Join(errs...)
}

// Exported reports whether the series name belongs to a family of
// exported.
func Exported(name string, exported map[string]dto.MetricType) bool {
	if _, ok := exported[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch exported[base] {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			if suffix != "_bucket" {
				return true
			}
		}
	}
	return false
}

// Names returns the metric names the dashboard reads, sorted.
func Names(dashboardJSON []byte) ([]string, error) {
	exprs, err := Expressions(dashboardJSON)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, e := range exprs {
		names, err := MetricNames(e.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Where, err)
		}
		for _, n := range names {
			set[n] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
