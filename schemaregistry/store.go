package schemaregistry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// stateFile is the file in the server's directory that holds everything.
const stateFile = "registry.json"

// stateFormat is the version of stateFile's layout, checked on load so that
// an older eddy refuses a file it would misread.
const stateFormat = 1

// state is the whole registry. It is small (schemas are text, a
// development registry holds hundreds of them), so it is kept in memory and
// written whole, atomically, after every change: a restart reads back
// exactly what was acknowledged.
type state struct {
	Format int `json:"format"`
	// NextID is the id the next new schema gets: ids are global, never
	// reused, and the same schema (type, canonical text, references) keeps
	// its id, even after its last version was permanently deleted.
	NextID   int                       `json:"next_id"`
	Schemas  map[int]*schemaRecord     `json:"schemas"`
	Subjects map[string]*subjectRecord `json:"subjects"`
	// Compatibility is the global level; subjects may override it.
	Compatibility string `json:"compatibility"`
	Mode          string `json:"mode"`
}

// schemaRecord is one registered schema, under its id.
type schemaRecord struct {
	Type       string      `json:"type"`
	Schema     string      `json:"schema"`
	References []Reference `json:"references,omitempty"`
	// Identity is what makes two schemas the same one (see identity).
	Identity string `json:"identity"`
}

// Reference names another subject's version that a schema imports
// (Confluent's schema references): Name is the Avro full name, the
// Protobuf import path or the JSON Schema $ref URL.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// subjectRecord is a subject's versions, oldest first, and its own
// compatibility level and mode ("" when it follows the global one). A
// subject whose every version was permanently deleted keeps its record
// only while it has a level or a mode of its own.
type subjectRecord struct {
	Versions      []versionRecord `json:"versions"`
	Compatibility string          `json:"compatibility,omitempty"`
	Mode          string          `json:"mode,omitempty"`
}

type versionRecord struct {
	Version int  `json:"version"`
	ID      int  `json:"id"`
	Deleted bool `json:"deleted,omitempty"`
}

func newState() *state {
	return &state{
		Format:        stateFormat,
		NextID:        1,
		Schemas:       map[int]*schemaRecord{},
		Subjects:      map[string]*subjectRecord{},
		Compatibility: defaultCompatibility,
		Mode:          modeReadWrite,
	}
}

// loadState reads dir's state file; a missing file is an empty registry.
func loadState(dir string) (*state, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("eddy: schema registry: %w", err)
	}
	st := newState()
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("eddy: schema registry: %s is corrupt: %w", filepath.Join(dir, stateFile), err)
	}
	if st.Format != stateFormat {
		return nil, fmt.Errorf("eddy: schema registry: %s has format %d; this eddy reads format %d", filepath.Join(dir, stateFile), st.Format, stateFormat)
	}
	st.reidentify()
	return st, nil
}

// saveState writes data to dir's state file the way that survives a crash
// at any point: a temporary file, fsynced, renamed over the old one, and
// the directory fsynced so that the rename itself is durable.
func saveState(dir string, data []byte) error {
	tmp, err := os.CreateTemp(dir, stateFile+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, stateFile)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// live reports the subject's versions that are not soft-deleted, or all of
// them with deleted.
func (s *subjectRecord) live(deleted bool) []versionRecord {
	if s == nil {
		return nil
	}
	var out []versionRecord
	for _, v := range s.Versions {
		if deleted || !v.Deleted {
			out = append(out, v)
		}
	}
	return out
}

// find returns the index of version n in s.Versions, or -1.
func (s *subjectRecord) find(n int) int {
	if s == nil {
		return -1
	}
	return slices.IndexFunc(s.Versions, func(v versionRecord) bool { return v.Version == n })
}

// subjectNames lists the subjects with a live version (any version with
// deleted), sorted as Confluent sorts them.
func (st *state) subjectNames(deleted bool) []string {
	names := []string{}
	for name, s := range st.Subjects {
		if len(s.live(deleted)) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// idFor returns the id of an identical schema registered before, or 0; the
// smallest, if several are (schemas registered before identity was
// computed as it is now, see reidentify).
func (st *state) idFor(rec *schemaRecord) int {
	found := 0
	for id, r := range st.Schemas {
		if same(r, rec) && (found == 0 || id < found) {
			found = id
		}
	}
	return found
}

// same reports whether two schema records are the same schema.
func same(a, b *schemaRecord) bool {
	return a != nil && a.Type == b.Type && a.Identity == b.Identity && slices.Equal(a.References, b.References)
}

// versionWith returns the newest of versions whose schema is the same as
// rec, and whether there is one. It compares each version's own schema,
// not one id: after reidentify, two ids may be one schema, and a subject
// may hold either.
func (st *state) versionWith(versions []versionRecord, rec *schemaRecord) (versionRecord, bool) {
	for i := len(versions) - 1; i >= 0; i-- {
		if same(st.Schemas[versions[i].ID], rec) {
			return versions[i], true
		}
	}
	return versionRecord{}, false
}

// reidentify computes every schema's identity again, after loading: how
// it is computed may have changed since the state was written (Protobuf
// schemas were identified by their text, whitespace included, before they
// could be sent as descriptors), and a schema must be found by the
// identity this registry computes for the same schema sent now. A schema
// that no longer parses keeps its identity.
func (st *state) reidentify() {
	for _, rec := range st.Schemas {
		p, err := st.parse(rec)
		if err != nil {
			continue
		}
		if id, err := identity(rec, p); err == nil {
			rec.Identity = id
		}
	}
}

// usages lists the subject versions that use schema id, sorted.
func (st *state) usages(id int, deleted bool) []subjectVersion {
	out := []subjectVersion{}
	for name, s := range st.Subjects {
		for _, v := range s.live(deleted) {
			if v.ID == id {
				out = append(out, subjectVersion{Subject: name, Version: v.Version})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Subject != out[j].Subject {
			return out[i].Subject < out[j].Subject
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// referencedBy lists the ids of schemas, used by some version that is not
// deleted, that reference subject's version.
func (st *state) referencedBy(subject string, version int) []int {
	var ids []int
	for id, rec := range st.Schemas {
		if !slices.ContainsFunc(rec.References, func(r Reference) bool { return r.Subject == subject && r.Version == version }) {
			continue
		}
		if len(st.usages(id, false)) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids
}

type subjectVersion struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}
