package chaos

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

// TestFaultAPIFailsRequests installs a Produce fault over HTTP in a real
// embedded broker and sees a producer get that error, then none once the
// fault's count is spent.
func TestFaultAPIFailsRequests(t *testing.T) {
	b, err := kafka.StartBroker(kafka.BrokerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { _ = ServeFaultAPI(ctx, ln, b.Cluster()) }()
	api := ln.Addr().String()

	if _, err := InstallFault(ctx, api, BrokerFault{Key: "Produce", Error: "NO_SUCH_ERROR"}); err == nil {
		t.Fatal("an unknown error name was accepted")
	}
	if _, err := InstallFault(ctx, api, BrokerFault{Key: "NoSuchRequest", Error: "NOT_COORDINATOR"}); err == nil {
		t.Fatal("an unknown request kind was accepted")
	}
	id, err := InstallFault(ctx, api, BrokerFault{Key: "Produce", Error: "INVALID_RECORD", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("produce under the fault: %v; want INVALID_RECORD", err)
	}
	if hits, err := FaultHits(ctx, api, id); err != nil || hits != 1 {
		t.Fatalf("hits = %d, %v; want 1", hits, err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("produce after the fault's count: %v", err)
	}
	if err := RemoveFault(ctx, api, id); err != nil {
		t.Fatal(err)
	}
	if _, err := FaultHits(ctx, api, id+1); err == nil {
		t.Fatal("hits of a fault that does not exist")
	}
}

func TestParseKinds(t *testing.T) {
	if k, err := ParseKinds("all"); err != nil || len(k) != len(AllKinds) {
		t.Fatalf("all: %v, %v", k, err)
	}
	if k, err := ParseKinds("kill, disk,kill"); err != nil || len(k) != 2 {
		t.Fatalf("kill, disk,kill: %v, %v", k, err)
	}
	if _, err := ParseKinds("kill,meteor"); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}
