package inspect

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

func TestDir(t *testing.T) {
	stateDir := t.TempDir()
	b := pebble.New(pebble.Options{})
	defer b.Close()
	write := func(name string, n int, tp state.TopicPartition) state.DB {
		db, err := b.Open(filepath.Join(stateDir, "ledger", filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		batch := &state.Batch{Offsets: state.Offsets{
			Input:      map[state.TopicPartition]int64{tp: int64(n)},
			Changelog:  map[string]int64{"balances": int64(n)},
			StreamTime: 1_700_000_000_000,
		}}
		for i := range n {
			batch.Writes = append(batch.Writes, state.Write{Store: "balances", Key: []byte{byte('a' + i)}, Value: []byte("0123456789")})
		}
		if err := db.Apply(batch); err != nil {
			t.Fatal(err)
		}
		return db
	}
	for _, name := range []string{"0_10", "0_2", "global/rates"} {
		if err := write(name, 3, state.TopicPartition{Topic: "payments", Partition: 2}).Close(); err != nil {
			t.Fatal(err)
		}
	}
	running := write("0_0", 1, state.TopicPartition{Topic: "payments", Partition: 0})
	defer running.Close()

	apps, err := Dir(stateDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(apps) != 1 || apps[0].ID != "ledger" {
		t.Fatalf("apps %+v, want the one app ledger", apps)
	}
	var names []string
	for _, db := range apps[0].DBs {
		names = append(names, db.Name)
	}
	if got := strings.Join(names, " "); got != "0_0 0_2 0_10 global/rates" {
		t.Fatalf("databases %q, want tasks in numeric order, then globals", got)
	}
	dbs := apps[0].DBs
	if !dbs[0].InUse || dbs[0].DiskBytes == 0 {
		t.Errorf("0_0 (held open): %+v, want in use with its size", dbs[0])
	}
	two := dbs[1]
	if two.InUse || two.Err != "" || len(two.Stores) != 1 || two.Stores[0] != (pebble.StoreSummary{Name: "balances", Keys: 3, KeyBytes: 3, ValueBytes: 30}) {
		t.Errorf("0_2: %+v", two)
	}
	if two.Input["payments/2"] != 3 || two.Changelog["balances"] != 3 || two.StreamTime == nil || two.StreamTime.UnixMilli() != 1_700_000_000_000 {
		t.Errorf("0_2 offsets: input %v changelog %v stream time %v", two.Input, two.Changelog, two.StreamTime)
	}

	var out bytes.Buffer
	if err := WriteText(&out, apps); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"app ledger", "in use by a running instance", "payments/2=3", "balances=3", "2023-11-14T22:13:20Z"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}

	if _, err := Dir(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "no application state") {
		t.Errorf("empty state dir: %v, want a 'no application state' error", err)
	}
}
