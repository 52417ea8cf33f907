package checkpoint_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/checkpoint"
	"github.com/eddy-streams/eddy/state"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func sampleManifest() *checkpoint.Manifest {
	o := state.NewOffsets()
	o.Input[state.TopicPartition{Topic: "payments", Partition: 3}] = 1234
	o.Input[state.TopicPartition{Topic: "a-repartition", Partition: 3}] = 5
	o.Changelog["balances"] = 999
	return &checkpoint.Manifest{
		Version: checkpoint.ManifestVersion, Task: "0_3", Seq: 7,
		Created: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		Offsets: checkpoint.OffsetsFrom(o),
		Files: []checkpoint.File{
			{Name: "000005.sst", Key: "files/000005-0123456789abcdef0123456789abcdef.sst", Size: 10, SHA256: strings.Repeat("ab", 32)},
			{Name: "LOCK", Size: 0, SHA256: strings.Repeat("00", 32)},
		},
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := sampleManifest()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.DecodeManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !checkpoint.Equal(got.Offsets.State(), m.Offsets.State()) || got.Offsets.StreamTime != math.MinInt64 {
		t.Fatalf("offsets %+v; want %+v (no stream time survives as math.MinInt64)", got.Offsets, m.Offsets)
	}
	if got.Seq != 7 || got.Task != "0_3" || !got.Created.Equal(m.Created) || len(got.Files) != 2 || got.Files[0] != m.Files[0] {
		t.Fatalf("decoded %+v; want %+v", got, m)
	}
	// Inputs are sorted: equal offsets give equal manifests.
	if got.Offsets.Input[0].Topic != "a-repartition" {
		t.Fatalf("inputs not sorted: %+v", got.Offsets.Input)
	}
}

func TestManifestRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(m *checkpoint.Manifest)
	}{
		{"no version", func(m *checkpoint.Manifest) { m.Version = 0 }},
		{"negative version", func(m *checkpoint.Manifest) { m.Version = -1 }},
		{"no task", func(m *checkpoint.Manifest) { m.Task = "" }},
		{"path in a name", func(m *checkpoint.Manifest) { m.Files[0].Name = "../../etc/passwd" }},
		{"duplicate name", func(m *checkpoint.Manifest) { m.Files[1].Name = m.Files[0].Name }},
		{"short checksum", func(m *checkpoint.Manifest) { m.Files[0].SHA256 = "abc" }},
		{"key outside files/", func(m *checkpoint.Manifest) { m.Files[0].Key = "manifests/x.json" }},
		{"key escaping", func(m *checkpoint.Manifest) { m.Files[0].Key = "files/../../other/x" }},
		{"no key for content", func(m *checkpoint.Manifest) { m.Files[0].Key = "" }},
		{"negative size", func(m *checkpoint.Manifest) { m.Files[0].Size = -1 }},
		{"negative offset", func(m *checkpoint.Manifest) { m.Offsets.Changelog["balances"] = -1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleManifest()
			tt.edit(m)
			b, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := checkpoint.DecodeManifest(b); !errors.Is(err, checkpoint.ErrDamaged) {
				t.Fatalf("decode: %v; want ErrDamaged", err)
			}
		})
	}
	for _, garbage := range []string{"", "{", "null", `{"version":1,"unknown":true}`, `{"version":1,"task":"0_1"} {}`} {
		if _, err := checkpoint.DecodeManifest([]byte(garbage)); !errors.Is(err, checkpoint.ErrDamaged) {
			t.Errorf("decode %q: %v; want ErrDamaged", garbage, err)
		}
	}
}

// TestManifestNewerVersion: a manifest a newer eddy wrote, with fields this
// one does not know, is refused as of a newer version (not as damaged),
// with an error that names its version and what to do.
func TestManifestNewerVersion(t *testing.T) {
	for _, b := range []string{
		`{"version":2,"task":"0_3","seq":7,"offsets":{},"files":[],"format":3}`,
		`{"version":99}`,
	} {
		_, err := checkpoint.DecodeManifest([]byte(b))
		if !errors.Is(err, checkpoint.ErrVersion) || errors.Is(err, checkpoint.ErrDamaged) {
			t.Fatalf("decode %s: %v; want ErrVersion, not ErrDamaged", b, err)
		}
		for _, want := range []string{"eddy: ", "newer than this eddy's (version 1)", "run an eddy release that reads version"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
	}
}

// FuzzDecodeManifest: whatever a store returns, decoding does not panic,
// and what it accepts re-encodes to a manifest it accepts again.
func FuzzDecodeManifest(f *testing.F) {
	b, _ := sampleManifest().Encode()
	f.Add(b)
	f.Add([]byte(`{"version":1,"task":"0_0","seq":0,"offsets":{"input":null,"changelog":{},"stream_time":0},"files":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := checkpoint.DecodeManifest(b)
		if err != nil {
			return
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.DecodeManifest(again); err != nil {
			t.Fatalf("re-encoded manifest rejected: %v", err)
		}
	})
}
