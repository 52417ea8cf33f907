package eddy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

type sinkCheckValue struct {
	Cents int64 `avro:"cents"`
}

const sinkCheckSchema = `{"type":"record","name":"Pay","fields":[{"name":"cents","type":"long"}]}`

// TestRunChecksSinkSerdes: Run registers the schemas of its sinks'
// registry serdes before it processes a record, and a schema the registry
// refuses stops Run at start with the registry's message, naming the sink.
func TestRunChecksSinkSerdes(t *testing.T) {
	url := registrytest.Start(t)
	reg, err := registry.New(registry.Config{URLs: []string{url}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	addr := startBroker(t)
	createTopics(t, addr, 1, "in", "out", "refused")
	topo := func(out string) *eddy.Topology {
		values, err := avro.Value[sinkCheckValue](reg, out, sinkCheckSchema)
		if err != nil {
			t.Fatal(err)
		}
		topo := eddy.NewTopology()
		in := eddy.Source(topo, "in", serde.String(), serde.Int64())
		eddy.To(eddy.MapValues(in, func(_ string, v int64) sinkCheckValue { return sinkCheckValue{v} }), out, serde.String(), values)
		return topo
	}

	// Accepted: registered at start, no record needed.
	r := run(t, topo("out"), config(t, addr))
	deadline := time.Now().Add(time.Minute)
	for {
		subjects, err := plain.Subjects(context.Background())
		if err == nil && strings.Join(subjects, ",") == "out-value" {
			break
		}
		if exited, err := r.exited(); exited || time.Now().After(deadline) {
			t.Fatalf("subjects %q (%v) with no record processed, Run exited: %v (%v); want out-value registered at start", subjects, err, exited, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	// Refused: the subject holds a schema this one cannot follow.
	if _, err := plain.CreateSchema(context.Background(), "refused-value", sr.Schema{Schema: `{"type":"record","name":"Pay","fields":[{"name":"cents","type":"string"}]}`}); err != nil {
		t.Fatal(err)
	}
	err = run(t, topo("refused"), config(t, addr)).wait(t)
	if lacks := errLacks(err, `eddy: the value serde of topic "refused"`, "ncompatible"); len(lacks) > 0 {
		t.Fatalf("Run = %v; lacks %q", err, lacks)
	}
}
