package chaos

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
)

// unmarkedIDs reads the raw log of topic (read_uncommitted, control
// records kept) and returns the payment ids (idOf of the values) of the
// records that their producer left without a marker: records followed by
// a record of a higher epoch of the same producer before any marker. Kafka never leaves
// that pattern (a bumped epoch first gets the open transaction marked
// aborted); the embedded broker can after a SIGKILL inside an EndTxn
// (docs/design.md §6.5, gap 1). eddy's reader takes such records for aborted,
// the broker's read_committed takes them for committed when the
// producer's next marker is a commit.
func unmarkedIDs(ctx context.Context, opts []kgo.Opt, topic string, idOf func(value []byte) (string, bool)) (map[string]bool, error) {
	scan, err := scanLog(ctx, opts, topic)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, r := range scan.unmarked {
		if id, ok := idOf(r.Value); ok {
			ids[id] = true
		}
	}
	return ids, nil
}

// scanLog reads topic's raw log to its end: the records left without a
// marker, and the producer epochs that wrote a commit marker.
func scanLog(ctx context.Context, opts []kgo.Opt, topic string) (*unmarkedScan, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, fmt.Errorf("chaos: read %s: %w", topic, err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("chaos: end offsets of %s: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	scan := newUnmarkedScan()
	for len(left) > 0 {
		pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := cl.PollFetches(pollCtx)
		expired := pollCtx.Err() != nil
		cancel()
		if expired {
			return nil, fmt.Errorf("chaos: read %s: stopped before its end (%d partitions left)", topic, len(left))
		}
		fs.EachRecord(func(r *kgo.Record) {
			scan.add(r)
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return scan, nil
}

// balanceID is the payment id of a balance; paymentID of a payment (what
// the late-records topic holds).
func balanceID(v []byte) (string, bool) {
	var b ledger.Balance
	err := json.Unmarshal(v, &b)
	return b.ID, err == nil
}

func paymentID(v []byte) (string, bool) {
	var p ledger.Payment
	err := json.Unmarshal(v, &p)
	return p.ID, err == nil
}

// unmarkedScan finds, partition by partition, the transactional records
// that a higher epoch of their producer follows before any marker.
type unmarkedScan struct {
	pending  map[int32]map[int64][]*kgo.Record // partition → producer → open records
	unmarked []*kgo.Record
	// committed are the producer epochs that wrote a commit marker.
	committed map[producerEpoch]bool
}

func newUnmarkedScan() *unmarkedScan {
	return &unmarkedScan{pending: map[int32]map[int64][]*kgo.Record{}, committed: map[producerEpoch]bool{}}
}

// torn are the producer epochs of the records left without a marker.
func (s *unmarkedScan) torn() map[producerEpoch]bool {
	torn := map[producerEpoch]bool{}
	for _, r := range s.unmarked {
		torn[epochOf(r)] = true
	}
	return torn
}

func (s *unmarkedScan) add(r *kgo.Record) {
	if !r.Attrs.IsTransactional() {
		return
	}
	byPID := s.pending[r.Partition]
	if byPID == nil {
		byPID = map[int64][]*kgo.Record{}
		s.pending[r.Partition] = byPID
	}
	open := byPID[r.ProducerID]
	switch {
	case r.Attrs.IsControl():
		delete(byPID, r.ProducerID)
		// A control record's key is its version (2 bytes) and type
		// (2 bytes): 1 is a commit, 0 an abort.
		if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1 {
			s.committed[epochOf(r)] = true
		}
	case len(open) > 0 && r.ProducerEpoch > open[0].ProducerEpoch:
		s.unmarked = append(s.unmarked, open...)
		byPID[r.ProducerID] = []*kgo.Record{r}
	default:
		byPID[r.ProducerID] = append(open, r)
	}
}

// producerEpoch names one transactional producer's epoch.
type producerEpoch struct {
	id    int64
	epoch int16
}

func epochOf(r *kgo.Record) producerEpoch { return producerEpoch{r.ProducerID, r.ProducerEpoch} }
