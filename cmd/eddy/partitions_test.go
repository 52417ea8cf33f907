package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy/internal/kafka"
)

func TestPartitionsFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no subcommand", nil, []string{"one subcommand, check"}},
		{"unknown subcommand", []string{"fix"}, []string{"one subcommand, check"}},
		{"no topic", []string{"check"}, []string{"--topic is required"}},
		{"bad sample", []string{"check", "--topic", "t", "--sample", "0"}, []string{"--sample is 0"}},
		{"stray", []string{"check", "--topic", "t", "now"}, []string{`unexpected argument "now"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := partitionsMain(t.Context(), tc.args, &stdout, &stderr)
			if err == nil {
				t.Fatal("partitionsMain succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := partitionsMain(t.Context(), []string{"check", "-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("check -h: %v, want flag.ErrHelp", err)
	}
}

// TestPartitionsCheck runs the command on topics of the embedded broker
// written by franz-go's default partitioner and with CRC32's partitions.
func TestPartitionsCheck(t *testing.T) {
	b, err := kafka.StartBroker(kafka.BrokerConfig{Addr: "127.0.0.1:0", DefaultPartitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := kafka.CreateTopics(t.Context(), cl, kafka.TopicSpec{Name: "m", Partitions: 3}, kafka.TopicSpec{Name: "c", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		key := []byte(fmt.Sprintf("user-%d", i))
		recs := []*kgo.Record{
			{Topic: "m", Key: key, Partition: kafka.KeyPartition(key, 3)},
			{Topic: "c", Key: key, Partition: kafka.CRC32KeyPartition(key, 3)},
		}
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for topic, want := range map[string]string{"m": "m: murmur2", "c": "c: crc32"} {
		var stdout, stderr bytes.Buffer
		if err := partitionsMain(t.Context(), []string{"check", "--brokers", b.Addr(), "--topic", topic}, &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "100.0%") {
			t.Errorf("eddy partitions check --topic %s printed\n%s\nwant the verdict %q", topic, stdout.String(), want)
		}
	}
}
