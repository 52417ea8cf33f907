package avro_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/testutil/apprun"
	"github.com/eddy-streams/eddy/internal/testutil/registrytest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/registry"
)

// TestRegistryDownStopsTheRun: under Run, a registry that stays
// unreachable for registry.Config.Timeout is not the records' fault: the
// app stops with an error wrapping serde.ErrUnavailable, dead-lettering
// and producing nothing, whatever the decode policy (the default,
// DeadLetter, here).
func TestRegistryDownStopsTheRun(t *testing.T) {
	addr := apprun.StartBroker(t)
	const in, out = "payments", "payments-out"
	apprun.CreateTopics(t, addr, 2, in, out, eddy.DeadLetterTopic(in))
	// Written while the registry was up: schema id 1.
	url := eddyRegistry(t)
	w := must(avro.Value[PaymentV1](newClient(t, url, registry.Config{}), in, paymentV1))(t)
	apprun.Produce(t, addr, in, &kgo.Record{Key: []byte("p1"), Value: must(w.Serialize(nil, PaymentV1{ID: "p1", Amount: 5}))(t)})

	down := newClient(t, registrytest.ClosedURL(t), registry.Config{Timeout: 300 * time.Millisecond})
	topo := eddy.NewTopology()
	eddy.To(eddy.Source(topo, in, serde.String(), must(avro.Value[PaymentV1](down, in, paymentV1))(t)), out, serde.String(), serde.JSON[PaymentV1]())
	app := apprun.Run(t, topo, apprun.Config(t, addr, "registry-down"))
	err := app.Wait(t)
	if !errors.Is(err, serde.ErrUnavailable) || !strings.HasPrefix(err.Error(), "eddy: ") {
		t.Fatalf("Run = %v; want an eddy: error wrapping serde.ErrUnavailable", err)
	}
	t.Log(err)
	if n := len(apprun.ReadAll(t, addr, eddy.DeadLetterTopic(in))) + len(apprun.ReadAll(t, addr, out)); n != 0 {
		t.Fatalf("%d records dead-lettered or produced, want none", n)
	}
}
