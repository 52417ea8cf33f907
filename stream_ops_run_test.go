package eddy_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/serde"
)

// TestRecordContextUnderRun: under Run, with four partitions, the metadata
// a WithContext operator sees is each record's partition and offset as the
// broker assigned them when the test produced it.
func TestRecordContextUnderRun(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	in, out := "events", "tagged"
	createTopics(t, addr, 4, in, out)
	topo := eddy.NewTopology()
	tagged := eddy.MapValuesWithContext(eddy.Source(topo, in, serde.String(), serde.String()),
		func(rc eddy.RecordContext, _, v string) string {
			h, _ := rc.Header("h")
			return fmt.Sprintf("%s %s/%d@%d ts=%d h=%s", v, rc.Topic, rc.Partition, rc.Offset, rc.Timestamp, h)
		})
	eddy.To(tagged, out, serde.String(), serde.String())
	app := run(t, topo, config(t, addr))

	var recs []*kgo.Record
	for i := range 12 {
		r := srec(fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
		r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i * 10))}}
		recs = append(recs, r)
	}
	produced := produce(t, addr, in, recs...)
	var want []string
	for i, r := range produced {
		want = append(want, fmt.Sprintf("%s=v%d %s/%d@%d ts=%d h=%d", r.Key, i, in, r.Partition, r.Offset, r.Timestamp.UnixMilli(), i*10))
	}
	got := renderStrings(t, waitRecords(t, addr, out, len(want), app))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("tagged:\n got %q\nwant %q", got, want)
	}
	partitions := map[int32]bool{}
	for _, r := range produced {
		partitions[r.Partition] = true
	}
	if len(partitions) < 2 {
		t.Errorf("the records went to %d partition(s); the test needs several", len(partitions))
	}
}
