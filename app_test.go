package eddy

import (
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/serde"
)

// TestCheckpointConfig: the checkpoint fields' defaults, and the mistakes
// Run reports before it contacts a broker, each naming the fix.
func TestCheckpointConfig(t *testing.T) {
	var c Config
	c.applyDefaults()
	if c.CheckpointInterval != time.Minute || c.CheckpointKeep != 3 {
		t.Fatalf("defaults: interval %v, keep %d; want 1m and 3", c.CheckpointInterval, c.CheckpointKeep)
	}
	store, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	topo := NewTopology()
	Count(GroupByKey(Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	base := Config{AppID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir()}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"URL and store", func(c *Config) { c.CheckpointURL, c.CheckpointStore = "file:///tmp/x", store }, "set one"},
		{"bad URL", func(c *Config) { c.CheckpointURL = "s3://" }, "CheckpointURL"},
		{"negative keep", func(c *Config) { c.CheckpointStore, c.CheckpointKeep = store, -1 }, "CheckpointKeep -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			err := Run(t.Context(), topo, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v; want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestStandbyReplicasConfig: a negative StandbyReplicas is reported by Run
// before it contacts a broker, naming the field and the fix.
func TestStandbyReplicasConfig(t *testing.T) {
	topo := NewTopology()
	Count(GroupByKey(Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	err := Run(t.Context(), topo, Config{AppID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir(), StandbyReplicas: -1})
	if err == nil || !strings.Contains(err.Error(), "StandbyReplicas -1: must be 0 (none) or more") {
		t.Fatalf("Run: %v; want an error naming StandbyReplicas", err)
	}
}

// TestNewReportsEveryConfigProblem: New returns every invalid field at
// once, each named with a valid value, before anything contacts a broker.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	topo := NewTopology()
	Count(GroupByKey(Source(topo, "in", serde.String(), serde.String()), serde.String()), "counts")
	_, err := New(topo, Config{
		AppID: "bad id", StateDir: t.TempDir(), Workers: -1, CommitInterval: -time.Second,
		Guarantee: Guarantee(7), OnProcessError: ErrorPolicy(9), Endpoint: "nohost", StateMemory: 1 << 20,
	})
	if err == nil {
		t.Fatal("New accepted an invalid config")
	}
	for _, want := range []string{
		"eddy: invalid config", `AppID "bad id"`, "Brokers: set at least one", "Workers -1", "CommitInterval -1s",
		"Guarantee 7", "OnProcessError 9", "Endpoint:", "StateMemory 1048576: must be at least 16777216 (16 MiB)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant it to name %q", err, want)
		}
	}
}

// TestNewReportsConfigAndTopologyTogether: a bad config and a bad topology
// are reported by one call.
func TestNewReportsConfigAndTopologyTogether(t *testing.T) {
	topo := NewTopology()
	s := Source(topo, "in", serde.String(), serde.String())
	To(s, "in", serde.String(), serde.String()) // a loop
	_, err := New(topo, Config{AppID: "app", StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "Brokers: set at least one") || !strings.Contains(err.Error(), "without end") {
		t.Fatalf("New: %v; want both the config's and the topology's problem", err)
	}
}
