package kafkaclient

import (
	"errors"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// TestCreateTopicsLike: outputs get the model's partition count, whatever
// the broker's default, and existing topics are left as they are.
func TestCreateTopicsLike(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, kafka.BrokerConfig{DefaultPartitions: 1})
	cl := newTestClient(t, b.Addr())

	if err := CreateTopics(ctx, cl, 3, "in"); err != nil {
		t.Fatal(err)
	}
	if err := CreateTopics(ctx, cl, 2, "existing"); err != nil {
		t.Fatal(err)
	}
	if err := CreateTopics(ctx, cl, 5, "in"); err != nil {
		t.Fatalf("creating an existing topic again: %v", err)
	}
	if err := CreateTopicsLike(ctx, cl, "in", "out", "late", "existing"); err != nil {
		t.Fatal(err)
	}
	parts, err := Partitions(ctx, cl, "in", "out", "late", "existing")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int32{"in": 3, "out": 3, "late": 3, "existing": 2} {
		if parts[topic] != want {
			t.Errorf("topic %s: %d partitions, want %d", topic, parts[topic], want)
		}
	}
}

func TestCreateTopicsErrors(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, kafka.BrokerConfig{})
	cl := newTestClient(t, b.Addr())

	err := CreateTopicsLike(ctx, cl, "no-such-model", "out")
	if !errors.Is(err, kafka.ErrUnknownTopic) || !strings.HasPrefix(err.Error(), "eddy: ") || !strings.Contains(err.Error(), "no-such-model") {
		t.Errorf("model missing: %v, want an eddy: error that names the model as unknown", err)
	}
	if _, err := Partitions(ctx, cl, "out"); !errors.Is(err, kafka.ErrUnknownTopic) {
		t.Errorf("CreateTopicsLike with a missing model created its topics: %v", err)
	}
	if err := CreateTopics(ctx, cl, -1, "x"); err == nil || !strings.Contains(err.Error(), "pass 0") {
		t.Errorf("negative partitions: %v, want the fix", err)
	}
	if err := CreateTopics(ctx, cl, 1, ""); err == nil || !strings.HasPrefix(err.Error(), "eddy: ") {
		t.Errorf("empty topic name: %v, want an eddy: error", err)
	}
}
