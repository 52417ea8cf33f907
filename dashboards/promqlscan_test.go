package dashboards

// A scanner that finds the metric names a PromQL expression reads, for
// the dashboard check (check_test.go).

import (
	"fmt"
	"strings"
)

// functions are PromQL's functions and aggregation operators: an
// identifier followed by "(" must be one of them.
var functions = setOf(
	"abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
	"day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "double_exponential_smoothing",
	"exp", "floor", "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile",
	"histogram_stddev", "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
	"info", "irate", "label_join", "label_replace", "ln", "log10", "log2", "minute", "month", "predict_linear",
	"rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sort_by_label", "sort_by_label_desc",
	"sqrt", "time", "timestamp", "vector", "year",
	"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
	"quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time",
	"mad_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh",
	"tan", "tanh", "deg", "rad", "pi", "start", "end",
)

// aggregations are PromQL's aggregation operators, followed by "(" or by
// a grouping clause: "sum(x) by (l)", "sum by (l) (x)".
var aggregations = setOf("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio")

// grouping keywords take a parenthesised list of label names.
var grouping = setOf("by", "without", "on", "ignoring", "group_left", "group_right")

// keywords are the other words of the language that are not metric names.
var keywords = setOf("bool", "and", "or", "unless", "atan2", "offset", "inf", "nan")

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// MetricNames returns the metric names expr reads, each once, in order of
// appearance: bare selectors ("rate(x_total[5m])" reads x_total) and
// {__name__="x"} matchers. Label names, functions, keywords, strings,
// numbers, durations and Grafana variables ($v, ${v}, [$__rate_interval])
// are not names. It returns an error for text that is not PromQL as far
// as a scanner can tell (an unknown function, an unclosed string or
// bracket).
func MetricNames(expr string) ([]string, error) {
	s := &scanner{src: expr}
	var names []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for {
		s.skipSpace()
		if s.done() {
			return names, nil
		}
		c := s.peek()
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := s.str(); err != nil {
				return nil, err
			}
		case c == '#':
			for !s.done() && s.peek() != '\n' {
				s.i++
			}
		case c == '{':
			n, err := s.matchers()
			if err != nil {
				return nil, err
			}
			if n != "" {
				add(n)
			}
		case c == '[':
			if err := s.skipBalanced('[', ']'); err != nil {
				return nil, err
			}
		case c == '$':
			s.variable()
		case isDigit(c) || c == '.' && s.i+1 < len(s.src) && isDigit(s.src[s.i+1]):
			s.number()
		case isIdentStart(c):
			id := s.ident()
			lower := strings.ToLower(id)
			s.skipSpace()
			next := byte(0)
			if !s.done() {
				next = s.peek()
			}
			switch {
			case grouping[lower]:
				if next == '(' {
					if err := s.skipBalanced('(', ')'); err != nil {
						return nil, err
					}
				}
			case keywords[lower]:
			case aggregations[lower] && (next == '(' || s.followedByGrouping()):
			case next == '(':
				if !functions[id] {
					return nil, fmt.Errorf("%q: unknown function %s at offset %d", expr, id, s.i)
				}
			default:
				add(id)
			}
		default:
			s.i++ // operators, parentheses, commas, @
		}
	}
}

// followedByGrouping reports whether the next word is "by" or "without".
func (s *scanner) followedByGrouping() bool {
	save := s.i
	defer func() { s.i = save }()
	w := strings.ToLower(s.ident())
	return w == "by" || w == "without"
}

type scanner struct {
	src string
	i   int
}

func (s *scanner) done() bool { return s.i >= len(s.src) }
func (s *scanner) peek() byte { return s.src[s.i] }

func (s *scanner) skipSpace() {
	for !s.done() && strings.IndexByte(" \t\r\n", s.peek()) >= 0 {
		s.i++
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }

func (s *scanner) ident() string {
	start := s.i
	for !s.done() && isIdent(s.peek()) {
		s.i++
	}
	return s.src[start:s.i]
}

// number skips a number or a duration: 0.99, 1e-3, 0x1f, 5m, 1h30m.
func (s *scanner) number() {
	for !s.done() {
		c := s.peek()
		switch {
		case isIdent(c) || c == '.':
			s.i++
		case (c == '+' || c == '-') && (s.src[s.i-1] == 'e' || s.src[s.i-1] == 'E') && !strings.HasPrefix(s.src[:s.i], "0x"):
			s.i++
		default:
			return
		}
	}
}

// variable skips a Grafana variable: $name, ${name}, ${name:format}.
func (s *scanner) variable() {
	s.i++ // $
	if !s.done() && s.peek() == '{' {
		for !s.done() && s.peek() != '}' {
			s.i++
		}
		if !s.done() {
			s.i++
		}
		return
	}
	s.ident()
}

// str reads a quoted string and returns its content (escapes kept).
func (s *scanner) str() (string, error) {
	q := s.peek()
	start := s.i
	s.i++
	for !s.done() {
		c := s.peek()
		switch {
		case c == '\\' && q != '`':
			s.i += 2
			continue
		case c == q:
			s.i++
			return s.src[start+1 : s.i-1], nil
		}
		s.i++
	}
	return "", fmt.Errorf("%q: unclosed string at offset %d", s.src, start)
}

// skipBalanced skips from an open bracket to its match, over strings.
func (s *scanner) skipBalanced(open, close byte) error {
	start, depth := s.i, 0
	for !s.done() {
		c := s.peek()
		switch c {
		case '"', '\'', '`':
			if _, err := s.str(); err != nil {
				return err
			}
			continue
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				s.i++
				return nil
			}
		}
		s.i++
	}
	return fmt.Errorf("%q: unclosed %c at offset %d", s.src, open, start)
}

// matchers reads a {...} list of label matchers and returns the metric
// name it selects, by __name__="x" or a quoted name alone ({"x", a="b"}),
// if any.
func (s *scanner) matchers() (string, error) {
	start := s.i
	s.i++ // {
	name := ""
	fail := func(what string) (string, error) {
		return "", fmt.Errorf("%q: %s in label matchers at offset %d", s.src, what, s.i)
	}
	for {
		s.skipSpace()
		if s.done() {
			return "", fmt.Errorf("%q: unclosed { at offset %d", s.src, start)
		}
		switch c := s.peek(); {
		case c == '}':
			s.i++
			return name, nil
		case c == ',':
			s.i++
			continue
		}
		// A label name (bare or quoted), or a quoted metric name alone.
		var label string
		switch c := s.peek(); {
		case c == '"' || c == '\'' || c == '`':
			v, err := s.str()
			if err != nil {
				return "", err
			}
			s.skipSpace()
			if !s.done() && (s.peek() == ',' || s.peek() == '}') {
				name = v
				continue
			}
			label = v
		case isIdentStart(c):
			label = s.ident()
		default:
			return fail(fmt.Sprintf("unexpected %q", c))
		}
		s.skipSpace()
		op := ""
		for !s.done() && strings.IndexByte("=!~", s.peek()) >= 0 {
			op += string(s.peek())
			s.i++
		}
		switch op {
		case "=", "!=", "=~", "!~":
		default:
			return fail(fmt.Sprintf("operator %q after label %s", op, label))
		}
		s.skipSpace()
		if s.done() {
			return fail("missing value")
		}
		switch c := s.peek(); {
		case c == '"' || c == '\'' || c == '`':
			v, err := s.str()
			if err != nil {
				return "", err
			}
			if label == "__name__" && op == "=" {
				name = v
			}
		case c == '$':
			s.variable()
		default:
			return fail(fmt.Sprintf("value %q is not a string", c))
		}
	}
}
