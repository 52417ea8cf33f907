package kafka

import (
	"slices"
	"testing"
)

// TestListTopics: every topic created is listed, sorted; none before.
func TestListTopics(t *testing.T) {
	ctx := testContext(t)
	b := startTestBroker(t, BrokerConfig{DefaultPartitions: 2})
	cl := newTestClient(t, b.Addr())
	before, err := ListTopics(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(before, "b-topic") {
		t.Fatalf("b-topic listed before it was created: %v", before)
	}
	if err := CreateTopics(ctx, cl, TopicSpec{Name: "b-topic"}, TopicSpec{Name: "a-topic"}); err != nil {
		t.Fatal(err)
	}
	got, err := ListTopics(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "a-topic") || !slices.Contains(got, "b-topic") || !slices.IsSorted(got) {
		t.Errorf("topics %v, want a-topic and b-topic, sorted", got)
	}
}
