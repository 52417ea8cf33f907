package eddytest_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// TestSourcePattern: records piped to any topic whose whole name matches
// reach the stream, tagged with their topic; a topic that matches only in
// part is not read, nor is the sink the stream writes, although its name
// matches (reading it would loop the output back in).
func TestSourcePattern(t *testing.T) {
	topo := eddy.NewTopology()
	orders := eddy.SourcePattern(topo, regexp.MustCompile(`orders-[a-z]+`), serde.String(), serde.String())
	tagged := eddy.MapValuesWithContext(orders, func(rc eddy.RecordContext, _ string, v string) string { return rc.Topic + ":" + v })
	eddy.To(tagged, "orders-all", serde.String(), serde.String())
	d, err := eddytest.New(topo, eddytest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, p := range []struct{ topic, value string }{{"orders-eu", "a"}, {"orders-us", "b"}, {"orders-eu", "c"}} {
		if err := eddytest.Input(d, p.topic, serde.String(), serde.String()).Pipe("k", p.value, 1); err != nil {
			t.Fatalf("pipe to %s: %v", p.topic, err)
		}
	}
	for _, topic := range []string{"eu-orders-x", "orders-eu2"} {
		if err := eddytest.Input(d, topic, serde.String(), serde.String()).Pipe("k", "z", 1); err == nil {
			t.Errorf("pipe to %s, which the pattern does not match whole: no error", topic)
		}
	}
	recs, err := eddytest.Output(d, "orders-all", serde.String(), serde.String()).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Value)
	}
	if want := []string{"orders-eu:a", "orders-us:b", "orders-eu:c"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
