package schemaregistry

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The modes this registry implements. IMPORT (registering with given ids)
// is refused: a development registry assigns its own.
const (
	modeReadWrite = "READWRITE"
	modeReadOnly  = "READONLY"
)

// subjectSchema is Confluent's answer for one version of a subject.
// schemaType is left out for AVRO and references when there are none, as
// Confluent does.
type subjectSchema struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

func (st *state) subjectSchema(subject string, v versionRecord) subjectSchema {
	rec := st.Schemas[v.ID]
	return subjectSchema{
		Subject:    subject,
		Version:    v.Version,
		ID:         v.ID,
		SchemaType: typeField(rec.Type),
		References: rec.References,
		Schema:     rec.Schema,
	}
}

// typeField is the schemaType to answer: none for AVRO, the default.
func typeField(typ string) string {
	if typ == typeAvro {
		return ""
	}
	return typ
}

// parseVersion reads a version path element: "latest" (or -1), or a
// number from 1 to 2^31-1. latest is returned as 0.
func parseVersion(s string) (int, error) {
	if s == "latest" || s == "-1" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > math.MaxInt32 {
		return 0, errInvalidVersion(s)
	}
	return n, nil
}

// version resolves a version of subject, soft-deleted ones only with
// deleted.
func (st *state) version(subject, vs string, deleted bool) (versionRecord, error) {
	n, err := parseVersion(vs)
	if err != nil {
		return versionRecord{}, err
	}
	live := st.Subjects[subject].live(deleted)
	if len(live) == 0 {
		return versionRecord{}, errSubjectNotFound(subject)
	}
	if n == 0 {
		return live[len(live)-1], nil
	}
	i := slices.IndexFunc(live, func(v versionRecord) bool { return v.Version == n })
	if i < 0 {
		return versionRecord{}, errVersionNotFound(strconv.Itoa(n))
	}
	return live[i], nil
}

// level is the compatibility level that applies to subject.
func (st *state) level(subject string) string {
	if s := st.Subjects[subject]; s != nil && s.Compatibility != "" {
		return s.Compatibility
	}
	return st.Compatibility
}

// olds parses the given versions for a compatibility check.
func (st *state) olds(versions []versionRecord) ([]oldSchema, error) {
	var out []oldSchema
	for _, v := range versions {
		rec := st.Schemas[v.ID]
		p, err := st.parse(rec)
		if err != nil {
			return nil, &apiError{http.StatusUnprocessableEntity, 42201, "Found an invalid " + rec.Type + " schema registered: " + err.Error()}
		}
		out = append(out, oldSchema{version: v.Version, text: rec.Schema, parsed: p})
	}
	return out, nil
}

func (s *Server) listSubjects(r *http.Request) (any, error) {
	prefix := r.URL.Query().Get("subjectPrefix")
	return s.read(func(st *state) (any, error) {
		names := st.subjectNames(deletedParam(r))
		return slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, prefix) }), nil
	})
}

// listSchemas is GET /schemas: every live version of every subject
// (?deleted=true: soft-deleted ones too), filtered by ?subjectPrefix= and,
// with ?latestOnly=true, only each subject's latest.
func (s *Server) listSchemas(r *http.Request) (any, error) {
	prefix := r.URL.Query().Get("subjectPrefix")
	latestOnly, _ := strconv.ParseBool(r.URL.Query().Get("latestOnly"))
	return s.read(func(st *state) (any, error) {
		out := []subjectSchema{}
		for _, name := range st.subjectNames(deletedParam(r)) {
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			live := st.Subjects[name].live(deletedParam(r))
			if latestOnly {
				live = live[len(live)-1:]
			}
			for _, v := range live {
				out = append(out, st.subjectSchema(name, v))
			}
		}
		return out, nil
	})
}

func (s *Server) listVersions(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	return s.read(func(st *state) (any, error) {
		live := st.Subjects[subject].live(deletedParam(r))
		if len(live) == 0 {
			return nil, errSubjectNotFound(subject)
		}
		versions := make([]int, len(live))
		for i, v := range live {
			versions[i] = v.Version
		}
		return versions, nil
	})
}

// getVersion is GET /subjects/{subject}/versions/{version}. With
// ?format=serialized a PROTOBUF schema is answered as Confluent does: its
// FileDescriptorProto, serialized and base64-encoded, instead of its text.
func (s *Server) getVersion(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	return s.read(func(st *state) (any, error) {
		v, err := st.version(subject, r.PathValue("version"), deletedParam(r))
		if err != nil {
			return nil, err
		}
		ss := st.subjectSchema(subject, v)
		if ss.Schema, err = st.formatted(st.Schemas[v.ID], r); err != nil {
			return nil, err
		}
		return ss, nil
	})
}

// formatted is rec's schema in the ?format= that r asks for: "serialized"
// turns a PROTOBUF schema into its base64 descriptor; every other format,
// and every other type, answer the stored text (Confluent's other formats
// are for Avro and JSON Schema features this registry does not have).
func (st *state) formatted(rec *schemaRecord, r *http.Request) (string, error) {
	if rec.Type != typeProtobuf || r.URL.Query().Get("format") != "serialized" {
		return rec.Schema, nil
	}
	text, err := st.serializedProtobuf(rec)
	if err != nil {
		return "", &apiError{http.StatusUnprocessableEntity, 42201, "Found an invalid PROTOBUF schema registered: " + err.Error()}
	}
	return text, nil
}

func (s *Server) getVersionText(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	return s.read(func(st *state) (any, error) {
		v, err := st.version(subject, r.PathValue("version"), deletedParam(r))
		if err != nil {
			return nil, err
		}
		return rawSchema(st.Schemas[v.ID].Schema), nil
	})
}

func (s *Server) getReferencedBy(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	return s.read(func(st *state) (any, error) {
		v, err := st.version(subject, r.PathValue("version"), true)
		if err != nil {
			return nil, err
		}
		ids := st.referencedBy(subject, v.Version)
		if ids == nil {
			ids = []int{}
		}
		return ids, nil
	})
}

// register is POST /subjects/{subject}/versions: the id of the schema,
// registered as a new version unless a live version already has it.
func (s *Server) register(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	rec, err := decodeSchema(r)
	if err != nil {
		return nil, err
	}
	return s.changeSubject(subject, func(st *state) (any, error) {
		p, err := st.prepare(rec)
		if err != nil {
			return nil, errInvalidSchema(rec.Type, err)
		}
		subj := st.Subjects[subject]
		live := subj.live(false)
		if v, ok := st.versionWith(live, rec); ok {
			return map[string]int{"id": v.ID}, nil
		}
		id := st.idFor(rec)
		olds, err := st.olds(live)
		if err != nil {
			return nil, err
		}
		if msgs := incompatibilities(st.level(subject), p, olds); len(msgs) > 0 {
			return nil, errIncompatible(subject, msgs)
		}
		if id == 0 {
			id = st.NextID
			st.NextID++
			st.Schemas[id] = rec
		}
		if subj == nil {
			subj = &subjectRecord{}
			st.Subjects[subject] = subj
		}
		next := 1
		if n := len(subj.Versions); n > 0 {
			next = subj.Versions[n-1].Version + 1
		}
		subj.Versions = append(subj.Versions, versionRecord{Version: next, ID: id})
		return map[string]int{"id": id}, nil
	})
}

// lookup is POST /subjects/{subject}: the version of subject that has the
// schema, newest first.
func (s *Server) lookup(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	rec, err := decodeSchema(r)
	if err != nil {
		return nil, err
	}
	return s.read(func(st *state) (any, error) {
		live := st.Subjects[subject].live(deletedParam(r))
		if len(live) == 0 {
			return nil, errSubjectNotFound(subject)
		}
		if _, err := st.prepare(rec); err != nil {
			return nil, errInvalidSchema(rec.Type, err)
		}
		if v, ok := st.versionWith(live, rec); ok {
			return st.subjectSchema(subject, v), nil
		}
		return nil, errSchemaNotFound(0)
	})
}

func permanentParam(r *http.Request) bool {
	b, _ := strconv.ParseBool(r.URL.Query().Get("permanent"))
	return b
}

// deleteSubject is DELETE /subjects/{subject}: soft (the versions stay
// readable with ?deleted=true and by id; the subject's own level goes), or
// with ?permanent=true, after a soft delete, hard. It answers the versions
// deleted.
func (s *Server) deleteSubject(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	permanent := permanentParam(r)
	return s.changeSubject(subject, func(st *state) (any, error) {
		subj := st.Subjects[subject]
		all, live := subj.live(true), subj.live(false)
		if len(all) == 0 {
			return nil, errSubjectNotFound(subject)
		}
		deleted := []int{}
		if !permanent {
			if len(live) == 0 {
				return nil, errSubjectSoftDeleted(subject)
			}
			for _, v := range live {
				if len(st.referencedBy(subject, v.Version)) > 0 {
					return nil, errReferenceExists(subject, v.Version)
				}
			}
			// As Confluent, deleting the subject deletes its level and
			// mode too.
			subj.Compatibility, subj.Mode = "", ""
			for i := range subj.Versions {
				if !subj.Versions[i].Deleted {
					subj.Versions[i].Deleted = true
					deleted = append(deleted, subj.Versions[i].Version)
				}
			}
			return deleted, nil
		}
		if len(live) > 0 {
			return nil, errSubjectNotSoftDeleted(subject)
		}
		for _, v := range all {
			deleted = append(deleted, v.Version)
		}
		subj.Versions = nil
		st.dropIfEmpty(subject)
		return deleted, nil
	})
}

// dropIfEmpty forgets a subject left with neither versions nor a level
// nor a mode.
func (st *state) dropIfEmpty(subject string) {
	if s := st.Subjects[subject]; s != nil && len(s.Versions) == 0 && s.Compatibility == "" && s.Mode == "" {
		delete(st.Subjects, subject)
	}
}

// deleteVersion is DELETE /subjects/{subject}/versions/{version}, soft or,
// after a soft delete, with ?permanent=true, hard. It answers the version.
func (s *Server) deleteVersion(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	permanent := permanentParam(r)
	return s.changeSubject(subject, func(st *state) (any, error) {
		// A soft delete resolves "latest" among live versions; a hard one
		// among all, since it deletes soft-deleted versions.
		v, err := st.version(subject, r.PathValue("version"), true)
		if err != nil {
			return nil, err
		}
		if r.PathValue("version") == "latest" || r.PathValue("version") == "-1" {
			if v, err = st.version(subject, "latest", permanent); err != nil {
				return nil, err
			}
		}
		subj := st.Subjects[subject]
		i := subj.find(v.Version)
		switch {
		case !permanent && v.Deleted:
			return nil, errVersionSoftDeleted(subject, v.Version)
		case permanent && !v.Deleted:
			return nil, errVersionNotSoftDeleted(subject, v.Version)
		case len(st.referencedBy(subject, v.Version)) > 0:
			return nil, errReferenceExists(subject, v.Version)
		case permanent:
			subj.Versions = slices.Delete(subj.Versions, i, i+1)
			st.dropIfEmpty(subject)
		default:
			subj.Versions[i].Deleted = true
			if len(subj.live(false)) == 0 {
				// As Confluent, deleting the last live version deletes
				// the subject's level and mode, as deleting the subject.
				subj.Compatibility, subj.Mode = "", ""
			}
		}
		return v.Version, nil
	})
}

// schemaID reads the {id} path element; anything but a number is Confluent's
// plain 404.
func schemaID(r *http.Request) (int, error) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		return 0, errNotFoundHTTP
	}
	return id, nil
}

// schemaUsed returns the schema with id if some version, soft-deleted or
// not, still uses it: soft-deleted versions stay readable by id (consumers
// decode old records with it); hard-deleted ones do not.
func (st *state) schemaUsed(id int) (*schemaRecord, error) {
	rec := st.Schemas[id]
	if rec == nil || len(st.usages(id, true)) == 0 {
		return nil, errSchemaNotFound(id)
	}
	return rec, nil
}

// schemaByID is GET /schemas/ids/{id}. The ?subject= parameter, which
// Confluent uses to pick a schema context, is accepted and has nothing to
// pick: this registry has only the default context. ?format= is as for
// getVersion.
func (s *Server) schemaByID(r *http.Request) (any, error) {
	id, err := schemaID(r)
	if err != nil {
		return nil, err
	}
	return s.read(func(st *state) (any, error) {
		rec, err := st.schemaUsed(id)
		if err != nil {
			return nil, err
		}
		text, err := st.formatted(rec, r)
		if err != nil {
			return nil, err
		}
		return struct {
			SchemaType string      `json:"schemaType,omitempty"`
			References []Reference `json:"references,omitempty"`
			Schema     string      `json:"schema"`
		}{typeField(rec.Type), rec.References, text}, nil
	})
}

func (s *Server) schemaTextByID(r *http.Request) (any, error) {
	id, err := schemaID(r)
	if err != nil {
		return nil, err
	}
	return s.read(func(st *state) (any, error) {
		rec, err := st.schemaUsed(id)
		if err != nil {
			return nil, err
		}
		return rawSchema(rec.Schema), nil
	})
}

func (s *Server) schemaVersionsByID(r *http.Request) (any, error) {
	id, err := schemaID(r)
	if err != nil {
		return nil, err
	}
	return s.read(func(st *state) (any, error) {
		if _, err := st.schemaUsed(id); err != nil {
			return nil, err
		}
		return st.usages(id, deletedParam(r)), nil
	})
}

func (s *Server) schemaSubjectsByID(r *http.Request) (any, error) {
	id, err := schemaID(r)
	if err != nil {
		return nil, err
	}
	return s.read(func(st *state) (any, error) {
		if _, err := st.schemaUsed(id); err != nil {
			return nil, err
		}
		subjects := []string{}
		for _, u := range st.usages(id, deletedParam(r)) {
			if !slices.Contains(subjects, u.Subject) {
				subjects = append(subjects, u.Subject)
			}
		}
		return subjects, nil
	})
}

type compatibilityLevel struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type compatibilityUpdate struct {
	Compatibility string `json:"compatibility"`
}

// getConfig is GET /config and GET /config/{subject} (a subject without a
// level of its own: 40408, or the global level with ?defaultToGlobal=true).
func (s *Server) getConfig(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	toGlobal, _ := strconv.ParseBool(r.URL.Query().Get("defaultToGlobal"))
	return s.read(func(st *state) (any, error) {
		if subject == "" {
			return compatibilityLevel{st.Compatibility}, nil
		}
		if subj := st.Subjects[subject]; subj != nil && subj.Compatibility != "" {
			return compatibilityLevel{subj.Compatibility}, nil
		}
		if toGlobal {
			return compatibilityLevel{st.Compatibility}, nil
		}
		return nil, errSubjectCompatNotConfigured(subject)
	})
}

// putConfig is PUT /config and PUT /config/{subject}: {"compatibility": L}.
func (s *Server) putConfig(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	var req compatibilityUpdate
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		return nil, errBadRequest(err)
	}
	level, ok := compatLevel(req.Compatibility)
	if !ok {
		return nil, errInvalidCompatibility(req.Compatibility)
	}
	return s.change(func(st *state) (any, error) {
		if subject == "" {
			st.Compatibility = level
		} else {
			if st.Subjects[subject] == nil {
				st.Subjects[subject] = &subjectRecord{}
			}
			st.Subjects[subject].Compatibility = level
		}
		return compatibilityUpdate{level}, nil
	})
}

// deleteConfig is DELETE /config (the global level back to BACKWARD) and
// DELETE /config/{subject} (the subject follows the global level again);
// both answer the level deleted.
func (s *Server) deleteConfig(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	return s.change(func(st *state) (any, error) {
		if subject == "" {
			prev := st.Compatibility
			st.Compatibility = defaultCompatibility
			return compatibilityLevel{prev}, nil
		}
		subj := st.Subjects[subject]
		if subj == nil || subj.Compatibility == "" {
			return nil, errSubjectCompatNotConfigured(subject)
		}
		prev := subj.Compatibility
		subj.Compatibility = ""
		st.dropIfEmpty(subject)
		return compatibilityLevel{prev}, nil
	})
}

// checkCompatibility is POST /compatibility/subjects/{subject}/versions/{v}
// (against that version, under the subject's level) and the same without
// {v} (against the versions the level names: the latest, or all for the
// transitive levels). ?verbose=true adds the reasons.
func (s *Server) checkCompatibility(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	vs := r.PathValue("version")
	verbose, _ := strconv.ParseBool(r.URL.Query().Get("verbose"))
	rec, err := decodeSchema(r)
	if err != nil {
		return nil, err
	}
	return s.read(func(st *state) (any, error) {
		var versions []versionRecord
		if vs != "" {
			v, err := st.version(subject, vs, false)
			if err != nil {
				return nil, err
			}
			versions = []versionRecord{v}
		} else {
			versions = st.Subjects[subject].live(false)
		}
		p, err := st.prepare(rec)
		if err != nil {
			return nil, errInvalidSchema(rec.Type, err)
		}
		olds, err := st.olds(versions)
		if err != nil {
			return nil, err
		}
		msgs := incompatibilities(st.level(subject), p, olds)
		answer := struct {
			IsCompatible bool      `json:"is_compatible"`
			Messages     *[]string `json:"messages,omitempty"`
		}{IsCompatible: len(msgs) == 0}
		if verbose {
			if msgs == nil {
				msgs = []string{}
			}
			answer.Messages = &msgs
		}
		return answer, nil
	})
}

type modeBody struct {
	Mode string `json:"mode"`
}

// modeOf is the mode that applies to subject: its own, or the global one.
func (st *state) modeOf(subject string) string {
	if s := st.Subjects[subject]; s != nil && s.Mode != "" {
		return s.Mode
	}
	return st.Mode
}

// getMode is GET /mode, and GET /mode/{subject}: the subject's own mode,
// or Confluent's 40409 if it has none, unless ?defaultToGlobal=true asks
// for the mode that applies to it.
func (s *Server) getMode(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	toGlobal, _ := strconv.ParseBool(r.URL.Query().Get("defaultToGlobal"))
	return s.read(func(st *state) (any, error) {
		if subject == "" || toGlobal {
			return modeBody{st.modeOf(subject)}, nil
		}
		if subj := st.Subjects[subject]; subj != nil && subj.Mode != "" {
			return modeBody{subj.Mode}, nil
		}
		return nil, &apiError{http.StatusNotFound, 40409, "Subject '" + subject + "' does not have subject-level mode configured"}
	})
}

// putMode is PUT /mode and PUT /mode/{subject}: READWRITE or READONLY,
// which refuses every change (of the subject's versions, for a subject's
// mode) but a change of mode. A subject may have a mode before it has a
// version, as in Confluent's.
func (s *Server) putMode(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	var req modeBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		return nil, errBadRequest(err)
	}
	mode := strings.ToUpper(req.Mode)
	if mode != modeReadWrite && mode != modeReadOnly {
		return nil, errInvalidMode(req.Mode)
	}
	return s.write(nil, func(st *state) (any, error) {
		if subject == "" {
			st.Mode = mode
			return modeBody{mode}, nil
		}
		if st.Subjects[subject] == nil {
			st.Subjects[subject] = &subjectRecord{}
		}
		st.Subjects[subject].Mode = mode
		return modeBody{mode}, nil
	})
}

// deleteMode is DELETE /mode/{subject}: the subject follows the global
// mode again. It answers the mode deleted; a subject without a mode of its
// own is Confluent's 40401.
func (s *Server) deleteMode(r *http.Request) (any, error) {
	subject := r.PathValue("subject")
	return s.write(nil, func(st *state) (any, error) {
		subj := st.Subjects[subject]
		if subj == nil || subj.Mode == "" {
			return nil, errSubjectNotFound(subject)
		}
		prev := subj.Mode
		subj.Mode = ""
		st.dropIfEmpty(subject)
		return modeBody{prev}, nil
	})
}
