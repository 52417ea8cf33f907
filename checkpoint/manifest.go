package checkpoint

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/state"
)

// ManifestVersion is the manifest format this package writes and reads.
// Like the task database's format it only grows. A manifest of a newer
// version (a newer eddy wrote it) is refused with ErrVersion, so an older
// eddy never restores what it cannot read correctly, and its retention
// leaves such a manifest and every file alone; one of no version (0) is
// damaged.
//
// The database files a manifest lists carry their own format version
// (state/internal/keys): a checkpoint of an older database format is
// migrated when its task opens it, one of a newer format refused there.
const ManifestVersion = 1

// ErrVersion is wrapped by the error for a manifest of a version newer
// than ManifestVersion. The runtime then restores from an older checkpoint
// or the changelog alone.
var ErrVersion = errors.New("eddy: unsupported checkpoint manifest version")

// Manifest describes one checkpoint of one task database.
type Manifest struct {
	Version int `json:"version"`
	// Task names the task (e.g. "0_3"); Seq orders the task's checkpoints.
	Task string `json:"task"`
	Seq  int64  `json:"seq"`
	// Created is the writer's clock when the checkpoint was uploaded.
	Created time.Time `json:"created"`
	// Offsets are what the checkpoint's database reflects.
	Offsets Offsets `json:"offsets"`
	// Files are every file of the database directory, sorted by name.
	Files []File `json:"files"`
}

// File is one file of a checkpointed database directory.
type File struct {
	// Name is the file's name in the database directory.
	Name string `json:"name"`
	// Key is the object holding the content, relative to the task
	// prefix; empty for an empty file, which has no object.
	Key    string `json:"key,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Offsets is state.Offsets in a JSON-friendly shape.
type Offsets struct {
	Input []InputOffset `json:"input"`
	// Changelog is, per store, the next changelog offset.
	Changelog map[string]int64 `json:"changelog"`
	// StreamTime is in ms since the epoch; state.NoStreamTime
	// (math.MinInt64) before the first record.
	StreamTime int64 `json:"stream_time"`
}

// InputOffset is the next offset to consume of one source partition.
type InputOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// OffsetsFrom converts state offsets, sorting the inputs so equal offsets
// encode to equal bytes.
func OffsetsFrom(o state.Offsets) Offsets {
	out := Offsets{Changelog: make(map[string]int64, len(o.Changelog)), StreamTime: o.StreamTime}
	for tp, off := range o.Input {
		out.Input = append(out.Input, InputOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	slices.SortFunc(out.Input, func(a, b InputOffset) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for s, off := range o.Changelog {
		out.Changelog[s] = off
	}
	return out
}

// State converts back to state offsets.
func (o Offsets) State() state.Offsets {
	s := state.NewOffsets()
	for _, in := range o.Input {
		s.Input[state.TopicPartition{Topic: in.Topic, Partition: in.Partition}] = in.Offset
	}
	for store, off := range o.Changelog {
		s.Changelog[store] = off
	}
	s.StreamTime = o.StreamTime
	return s
}

// Equal reports whether a and b are the same offsets.
func Equal(a, b state.Offsets) bool {
	if a.StreamTime != b.StreamTime || len(a.Input) != len(b.Input) || len(a.Changelog) != len(b.Changelog) {
		return false
	}
	for k, v := range a.Input {
		if w, ok := b.Input[k]; !ok || w != v {
			return false
		}
	}
	for k, v := range a.Changelog {
		if w, ok := b.Changelog[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Prefixes and names of a task's objects, relative to TaskPrefix.
const (
	filesDir     = "files/"
	manifestsDir = "manifests/"
	manifestExt  = ".json"
)

// TaskPrefix is where the checkpoints of task of app live in a store.
func TaskPrefix(app, task string) string { return app + "/" + task + "/" }

// manifestKey is the key of checkpoint seq, zero-padded so that keys sort
// like their numbers.
func manifestKey(seq int64) string {
	return fmt.Sprintf("%s%020d%s", manifestsDir, seq, manifestExt)
}

// parseManifestKey returns the sequence number of a manifest key relative
// to the task prefix.
func parseManifestKey(rel string) (int64, bool) {
	name, ok := strings.CutPrefix(rel, manifestsDir)
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(name, manifestExt)
	if !ok || len(num) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	return seq, err == nil && seq >= 0
}

// fileKey is the content-addressed key of a file: its name (readable in a
// listing) and 128 bits of its SHA-256 (distinct contents get distinct
// keys: a MANIFEST or WAL of the same name in two checkpoints, or a table
// of a rebuilt database that reuses a file number).
func fileKey(name, sum string) string {
	ext := path.Ext(name)
	return filesDir + strings.TrimSuffix(name, ext) + "-" + sum[:32] + ext
}

// Encode returns the manifest's JSON.
func (m *Manifest) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeManifest parses and validates a manifest. Anything that does not
// describe a restorable database wraps ErrDamaged.
func DecodeManifest(b []byte) (*Manifest, error) {
	// The version first, on its own: a newer manifest may have fields this
	// eddy does not know, which the strict decoding below would take for
	// damage.
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err == nil && v.Version > ManifestVersion {
		return nil, fmt.Errorf("%w: manifest version %d, newer than this eddy's (version %d): run an eddy release that reads version %d to restore it; "+
			"this one restores from an older checkpoint or the changelog", ErrVersion, v.Version, ManifestVersion, v.Version)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", ErrDamaged, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: manifest: trailing data", ErrDamaged)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", ErrDamaged, err)
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	if m.Version != ManifestVersion {
		return fmt.Errorf("version %d, not a version eddy writes (this eddy reads version %d)", m.Version, ManifestVersion)
	}
	if m.Task == "" || m.Seq < 0 {
		return fmt.Errorf("no task or a negative sequence number")
	}
	seen := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		if f.Name == "" || f.Name != path.Base(f.Name) || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, "\\\x00") {
			return fmt.Errorf("file name %q is not a plain file name", f.Name)
		}
		if seen[f.Name] {
			return fmt.Errorf("file %q listed twice", f.Name)
		}
		seen[f.Name] = true
		if f.Size < 0 {
			return fmt.Errorf("file %q: negative size", f.Name)
		}
		if sum, err := hex.DecodeString(f.SHA256); err != nil || len(sum) != 32 {
			return fmt.Errorf("file %q: SHA-256 %q is not 64 hex digits", f.Name, f.SHA256)
		}
		switch {
		case f.Size == 0 && f.Key != "":
			return fmt.Errorf("file %q: empty but has a key", f.Name)
		case f.Size > 0 && (!strings.HasPrefix(f.Key, filesDir) || CheckKey(f.Key) != nil):
			return fmt.Errorf("file %q: key %q is not under %s", f.Name, f.Key, filesDir)
		}
	}
	for _, in := range m.Offsets.Input {
		if in.Topic == "" || in.Offset < 0 {
			return fmt.Errorf("bad input offset %+v", in)
		}
	}
	for s, off := range m.Offsets.Changelog {
		if s == "" || off < 0 {
			return fmt.Errorf("bad changelog offset %q: %d", s, off)
		}
	}
	return nil
}
