package kafka

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCreateTopics(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, BrokerConfig{DefaultPartitions: 5})
	cl := newTestClient(t, b.Addr())

	specs := []TopicSpec{
		{Name: "orders", Partitions: 3},
		{Name: "app-store-changelog", Partitions: 3, Compacted: true, Configs: map[string]string{"min.compaction.lag.ms": "100"}},
		{Name: "defaults"},
	}
	// Twice: the second call finds every topic present and succeeds.
	for range 2 {
		if err := CreateTopics(ctx, cl, specs...); err != nil {
			t.Fatal(err)
		}
	}
	// An existing topic is left alone, even if the spec differs.
	if err := CreateTopics(ctx, cl, TopicSpec{Name: "orders", Partitions: 9}); err != nil {
		t.Fatal(err)
	}

	counts, err := Partitions(ctx, cl, "orders", "app-store-changelog", "defaults")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"orders": 3, "app-store-changelog": 3, "defaults": 5}
	for topic, n := range want {
		if counts[topic] != n {
			t.Errorf("%s has %d partitions, want %d", topic, counts[topic], n)
		}
	}

	cfgs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, "app-store-changelog", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := topicConfig(t, cfgs, "app-store-changelog", "cleanup.policy"); got != "compact" {
		t.Errorf("changelog cleanup.policy = %q, want compact", got)
	}
	if got := topicConfig(t, cfgs, "app-store-changelog", "min.compaction.lag.ms"); got != "100" {
		t.Errorf("changelog min.compaction.lag.ms = %q, want 100", got)
	}
	if got := topicConfig(t, cfgs, "orders", "cleanup.policy"); got == "compact" {
		t.Errorf("orders cleanup.policy = %q, want the default (delete)", got)
	}
}

func TestCreateTopicsInvalidSpecs(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, BrokerConfig{})
	cl := newTestClient(t, b.Addr())

	err := CreateTopics(ctx, cl,
		TopicSpec{Name: ""},
		TopicSpec{Name: "neg", Partitions: -2},
		TopicSpec{Name: "clash", Compacted: true, Configs: map[string]string{"cleanup.policy": "delete"}},
		TopicSpec{Name: "fine"},
	)
	if err == nil {
		t.Fatal("CreateTopics with invalid specs succeeded")
	}
	// Every problem is reported at once, and nothing is created.
	for _, want := range []string{"empty name", `"neg"`, `"clash"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := Partitions(ctx, cl, "fine"); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("a valid spec next to invalid ones was created (err %v)", err)
	}

	// A broker-side rejection names the topic too. Kafka refuses names
	// that collide with an existing one once '.' and '_' are equated.
	if err := CreateTopics(ctx, cl, TopicSpec{Name: "app.events"}); err != nil {
		t.Fatal(err)
	}
	err = CreateTopics(ctx, cl, TopicSpec{Name: "app_events"})
	if !errors.Is(err, kerr.InvalidTopicException) || !strings.Contains(err.Error(), `"app_events"`) || !strings.HasPrefix(err.Error(), "kafka:") {
		t.Errorf("colliding name: err %v, want a kafka: error naming the topic and wrapping %v", err, kerr.InvalidTopicException)
	}
}

func TestPartitionsUnknownTopic(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, BrokerConfig{})
	cl := newTestClient(t, b.Addr())
	if err := CreateTopics(ctx, cl, TopicSpec{Name: "present", Partitions: 2}); err != nil {
		t.Fatal(err)
	}

	_, err := Partitions(ctx, cl, "present", "missing-1", "missing-2")
	if !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("err = %v, want ErrUnknownTopic", err)
	}
	for _, name := range []string{"missing-1", "missing-2"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	if strings.Contains(err.Error(), "present") {
		t.Errorf("error %q names a topic that exists", err)
	}

	// Asking must not auto-create (the broker allows auto-creation), and
	// a topic created right after a miss is seen at once: no stale
	// metadata cache answers in between.
	if err := CreateTopics(ctx, cl, TopicSpec{Name: "missing-1", Partitions: 6}); err != nil {
		t.Fatal(err)
	}
	counts, err := Partitions(ctx, cl, "missing-1")
	if err != nil {
		t.Fatal(err)
	}
	if counts["missing-1"] != 6 {
		t.Fatalf("missing-1 has %d partitions, want the 6 just created (not auto-created)", counts["missing-1"])
	}
	if _, err := Partitions(ctx, cl, "missing-2"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second ask for missing-2: err %v, want ErrUnknownTopic", err)
	}

	if counts, err := Partitions(ctx, cl); err != nil || len(counts) != 0 {
		t.Fatalf("Partitions of no topics = %v, %v; want empty, nil", counts, err)
	}
}

// An app may start before its broker, or while it restarts: CreateTopics
// waits for the broker instead of failing at once.
func TestCreateTopicsWaitsForTheBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there yet
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	done := make(chan error, 1)
	go func() {
		done <- CreateTopics(t.Context(), cl, TopicSpec{Name: "late", Partitions: 2})
	}()
	select {
	case err := <-done:
		t.Fatalf("CreateTopics returned before a broker existed: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	b, err := StartBroker(BrokerConfig{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := <-done; err != nil {
		t.Fatalf("CreateTopics after the broker came up: %v", err)
	}
	parts, err := Partitions(t.Context(), cl, "late")
	if err != nil || parts["late"] != 2 {
		t.Fatalf("got %v, %v", parts, err)
	}
}
