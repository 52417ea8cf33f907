package eddy_test

import (
	"os"
	"testing"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

type undeclared struct {
	spec eddy.KeyValueStoreSpec[string, string]
	ctx  *eddy.ProcessorContext[string, string]
	kv   *eddy.KVStore[string, string]
}

func (p *undeclared) Init(ctx *eddy.ProcessorContext[string, string]) error {
	p.ctx, p.kv = ctx, p.spec.Open(ctx)
	return nil
}
func (p *undeclared) Close() error { return nil }
func (p *undeclared) Process(r eddy.Record[string, string]) error {
	if err := p.kv.Put(r.Key, r.Value); err != nil {
		return err
	}
	return p.ctx.Forward(r)
}

func TestScratchUndeclaredStore(t *testing.T) {
	if os.Getenv("EDDY_SCRATCH") == "" {
		t.Skip()
	}
	addr := startBroker(t)
	createTopics(t, addr, 1, "in", "out")
	declared := eddy.KeyValueStore("declared", serde.String(), serde.String())
	hidden := eddy.KeyValueStore("hidden", serde.String(), serde.String())
	topo := eddy.NewTopology()
	s := eddy.Source(topo, "in", serde.String(), serde.String())
	var stores []eddy.StoreSpec
	if os.Getenv("EDDY_SCRATCH") == "one" {
		stores = append(stores, declared)
	}
	p := eddy.Process(s, "p", func() eddy.Processor[string, string, string, string] { return &undeclared{spec: hidden} }, stores...)
	eddy.To(p, "out", serde.String(), serde.String())
	cfg := config(t, addr)
	app := run(t, topo, cfg)
	produce(t, addr, "in", srec("k", "v"))
	waitRecords(t, addr, "out", 1, app)
	st := changelogState(t, addr, changelogTopic(cfg.AppID, "declared"))
	t.Logf("declared changelog: %q", st)
	t.Logf("stop: %v", app.stop(t))
}
