package schemaregistry

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Server is the registry: an http.Handler over the state in its directory.
// All its methods are safe for concurrent use.
type Server struct {
	dir   string // "" keeps nothing on disk
	users map[string]string
	mux   *http.ServeMux

	mu sync.Mutex // guards st and the state file
	st *state

	httpMu sync.Mutex
	https  []*http.Server
	closed bool
}

// Option configures a Server.
type Option func(*Server)

// WithBasicAuth makes every request authenticate with HTTP basic auth as
// one of users (name to password), as Confluent's registry does with
// authentication.method=BASIC; others get 401.
func WithBasicAuth(users map[string]string) Option {
	return func(s *Server) { s.users = users }
}

// NewServer opens the registry kept in dir, creating dir (0700) if needed;
// dir "" keeps the registry in memory only, for tests that need no
// restart. Serve it with Serve, or mount it: a Server is an http.Handler.
func NewServer(dir string, opts ...Option) (*Server, error) {
	s := &Server{dir: dir, st: newState()}
	for _, o := range opts {
		o(s)
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("eddy: schema registry: %w", err)
		}
		st, err := loadState(dir)
		if err != nil {
			return nil, err
		}
		s.st = st
	}
	s.routes()
	return s, nil
}

// Serve answers requests on ln until Close; it returns nil after Close. For
// TLS, pass a tls.NewListener.
func (s *Server) Serve(ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.httpMu.Lock()
	if s.closed {
		s.httpMu.Unlock()
		ln.Close()
		return nil
	}
	s.https = append(s.https, hs)
	s.httpMu.Unlock()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("eddy: schema registry: %w", err)
	}
	return nil
}

// Close stops every Serve and waits for requests in flight (their changes
// are on disk when they are answered, so nothing else needs flushing).
func (s *Server) Close() error {
	s.httpMu.Lock()
	s.closed = true
	https := s.https
	s.https = nil
	s.httpMu.Unlock()
	var errs []error
	for _, hs := range https {
		errs = append(errs, hs.Close())
	}
	// Wait for handlers holding the state.
	s.mu.Lock()
	s.mu.Unlock() // an empty critical section: a barrier
	return errors.Join(errs...)
}

// contentType is what Confluent answers with; clients send it, or
// application/json, which is accepted the same.
const contentType = "application/vnd.schemaregistry.v1+json"

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.users != nil {
		name, pass, ok := r.BasicAuth()
		want, known := s.users[name]
		if !ok || !known || subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="eddy schema registry"`)
			writeError(w, &apiError{http.StatusUnauthorized, http.StatusUnauthorized, "Unauthorized"})
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// apiError is an error answer: the HTTP status and Confluent's body.
type apiError struct {
	status  int
	code    int
	message string
}

func (e *apiError) Error() string { return e.message }

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, struct {
		ErrorCode int    `json:"error_code"`
		Message   string `json:"message"`
	}{e.code, e.message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // schemas carry <, > and &; Confluent does not escape them
	enc.Encode(v)
}

// Confluent's errors (io.confluent.kafka.schemaregistry.rest.exceptions.Errors),
// with its messages.
func errSubjectNotFound(subject string) *apiError {
	return &apiError{http.StatusNotFound, 40401, fmt.Sprintf("Subject '%s' not found.", subject)}
}

func errVersionNotFound(version string) *apiError {
	return &apiError{http.StatusNotFound, 40402, fmt.Sprintf("Version %s not found.", version)}
}

func errSchemaNotFound(id int) *apiError {
	if id == 0 {
		return &apiError{http.StatusNotFound, 40403, "Schema not found"}
	}
	return &apiError{http.StatusNotFound, 40403, fmt.Sprintf("Schema %d not found", id)}
}

func errSubjectSoftDeleted(subject string) *apiError {
	return &apiError{http.StatusNotFound, 40404, fmt.Sprintf("Subject '%s' was soft deleted.Set permanent=true to delete permanently", subject)}
}

func errSubjectNotSoftDeleted(subject string) *apiError {
	return &apiError{http.StatusNotFound, 40405, fmt.Sprintf("Subject '%s' was not deleted first before being permanently deleted", subject)}
}

func errVersionSoftDeleted(subject string, version int) *apiError {
	return &apiError{http.StatusNotFound, 40406, fmt.Sprintf("Subject '%s' Version %d was soft deleted.Set permanent=true to delete permanently", subject, version)}
}

func errVersionNotSoftDeleted(subject string, version int) *apiError {
	return &apiError{http.StatusNotFound, 40407, fmt.Sprintf("Subject '%s' Version %d was not deleted first before being permanently deleted", subject, version)}
}

func errSubjectCompatNotConfigured(subject string) *apiError {
	return &apiError{http.StatusNotFound, 40408, fmt.Sprintf("Subject '%s' does not have subject-level compatibility configured", subject)}
}

func errIncompatible(subject string, msgs []string) *apiError {
	msg := fmt.Sprintf("Schema being registered is incompatible with an earlier schema for subject \"%s\"", subject)
	if len(msgs) > 0 {
		msg += ", details: ["
		for i, m := range msgs {
			if i > 0 {
				msg += ", "
			}
			msg += m
		}
		msg += "]"
	}
	return &apiError{http.StatusConflict, 409, msg}
}

func errInvalidSchema(typ string, err error) *apiError {
	return &apiError{http.StatusUnprocessableEntity, 42201, fmt.Sprintf("Invalid schema of type %s, details: %v", typ, err)}
}

func errInvalidVersion(version string) *apiError {
	return &apiError{http.StatusUnprocessableEntity, 42202, fmt.Sprintf("The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", version)}
}

func errInvalidCompatibility(level string) *apiError {
	return &apiError{http.StatusUnprocessableEntity, 42203, fmt.Sprintf("Invalid compatibility level %q. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive", level)}
}

func errInvalidMode(mode string) *apiError {
	return &apiError{http.StatusUnprocessableEntity, 42204, fmt.Sprintf("Invalid mode %q. Valid values are READWRITE and READONLY (this development registry does not implement IMPORT)", mode)}
}

func errReadOnly(subject string) *apiError {
	if subject == "" {
		return &apiError{http.StatusUnprocessableEntity, 42205, "The registry is in read-only mode"}
	}
	return &apiError{http.StatusUnprocessableEntity, 42205, fmt.Sprintf("Subject %s is in read-only mode", subject)}
}

func errReferenceExists(subject string, version int) *apiError {
	return &apiError{http.StatusUnprocessableEntity, 42206, fmt.Sprintf("One or more references exist to the schema {magic=1,keytype=SCHEMA,subject=%s,version=%d}.", subject, version)}
}

func errStore(err error) *apiError {
	return &apiError{http.StatusInternalServerError, 50001, fmt.Sprintf("Error while storing the registry: %v", err)}
}

func errBadRequest(err error) *apiError {
	return &apiError{http.StatusBadRequest, http.StatusBadRequest, fmt.Sprintf("Malformed request: %v", err)}
}

var (
	errNotFoundHTTP  = &apiError{http.StatusNotFound, http.StatusNotFound, "HTTP 404 Not Found"}
	errMethodHTTP    = &apiError{http.StatusMethodNotAllowed, http.StatusMethodNotAllowed, "HTTP 405 Method Not Allowed"}
	knownHTTPMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
)

// handler adapts a function that answers a value or an *apiError.
func (s *Server) handler(f func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := f(r)
		var ae *apiError
		switch {
		case errors.As(err, &ae):
			writeError(w, ae)
		case err != nil:
			writeError(w, errStore(err))
		default:
			if raw, ok := v.(rawSchema); ok {
				// The /schema endpoints answer the schema text itself.
				w.Header().Set("Content-Type", contentType)
				io.WriteString(w, string(raw))
				return
			}
			writeJSON(w, http.StatusOK, v)
		}
	}
}

// rawSchema is an answer written as is, not as a JSON string.
type rawSchema string

func (s *Server) routes() {
	m := http.NewServeMux()
	h := func(pattern string, f func(r *http.Request) (any, error)) { m.Handle(pattern, s.handler(f)) }
	h("GET /schemas/types", func(*http.Request) (any, error) {
		return []string{typeJSON, typeProtobuf, typeAvro}, nil
	})
	h("GET /schemas", s.listSchemas)
	h("GET /schemas/ids/{id}", s.schemaByID)
	h("GET /schemas/ids/{id}/schema", s.schemaTextByID)
	h("GET /schemas/ids/{id}/versions", s.schemaVersionsByID)
	h("GET /schemas/ids/{id}/subjects", s.schemaSubjectsByID)
	h("GET /subjects", s.listSubjects)
	h("POST /subjects/{subject}", s.lookup)
	h("DELETE /subjects/{subject}", s.deleteSubject)
	h("GET /subjects/{subject}/versions", s.listVersions)
	h("POST /subjects/{subject}/versions", s.register)
	h("GET /subjects/{subject}/versions/{version}", s.getVersion)
	h("GET /subjects/{subject}/versions/{version}/schema", s.getVersionText)
	h("GET /subjects/{subject}/versions/{version}/referencedby", s.getReferencedBy)
	h("DELETE /subjects/{subject}/versions/{version}", s.deleteVersion)
	h("GET /config", s.getConfig)
	h("PUT /config", s.putConfig)
	h("DELETE /config", s.deleteConfig)
	h("GET /config/{subject}", s.getConfig)
	h("PUT /config/{subject}", s.putConfig)
	h("DELETE /config/{subject}", s.deleteConfig)
	h("POST /compatibility/subjects/{subject}/versions/{version}", s.checkCompatibility)
	h("POST /compatibility/subjects/{subject}/versions", s.checkCompatibility)
	h("GET /mode", s.getMode)
	h("PUT /mode", s.putMode)
	h("GET /mode/{subject}", s.getMode)
	h("PUT /mode/{subject}", s.putMode)
	h("DELETE /mode/{subject}", s.deleteMode)
	h("GET /{$}", func(*http.Request) (any, error) { return struct{}{}, nil })
	// Everything else: Confluent's JSON 404, or 405 where another method
	// has a route.
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, method := range knownHTTPMethods {
			probe := r.Clone(r.Context())
			probe.Method = method
			if _, pattern := m.Handler(probe); pattern != "/" && pattern != "" {
				writeError(w, errMethodHTTP)
				return
			}
		}
		writeError(w, errNotFoundHTTP)
	})
	s.mux = m
}

// change runs f on the state under the lock and, if f succeeds, persists
// the state before answering; if persisting fails, the state returns to
// what is on disk, so that memory never holds what a restart would lose.
// The global READONLY mode refuses it.
func (s *Server) change(f func(st *state) (any, error)) (any, error) {
	return s.write(func(st *state) error {
		if st.Mode == modeReadOnly {
			return errReadOnly("")
		}
		return nil
	}, f)
}

// changeSubject is change for a change of subject's versions, which the
// mode that applies to subject refuses if it is READONLY: the subject's
// own, or else the global one (so a READWRITE subject takes changes while
// the registry is READONLY, as in Confluent's).
func (s *Server) changeSubject(subject string, f func(st *state) (any, error)) (any, error) {
	return s.write(func(st *state) error {
		if st.modeOf(subject) == modeReadOnly {
			return errReadOnly(subject)
		}
		return nil
	}, f)
}

// write runs f as change does, if allowed (nil: always) lets it; only a
// change of mode itself is not checked.
func (s *Server) write(allowed func(st *state) error, f func(st *state) (any, error)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if allowed != nil {
		if err := allowed(s.st); err != nil {
			return nil, err
		}
	}
	before, err := json.Marshal(s.st)
	if err != nil {
		return nil, err
	}
	v, err := f(s.st)
	if err != nil {
		return nil, err
	}
	if s.dir == "" {
		return v, nil
	}
	after, err := json.Marshal(s.st)
	if err != nil {
		return nil, err
	}
	if err := saveState(s.dir, after); err != nil {
		restored := newState()
		if uerr := json.Unmarshal(before, restored); uerr == nil {
			s.st = restored
		}
		return nil, err
	}
	return v, nil
}

// read runs f on the state under the lock.
func (s *Server) read(f func(st *state) (any, error)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f(s.st)
}

// deletedParam reports ?deleted=true.
func deletedParam(r *http.Request) bool {
	b, _ := strconv.ParseBool(r.URL.Query().Get("deleted"))
	return b
}

// schemaRequest is the body of register, lookup and compatibility checks.
// Unknown fields (metadata, ruleSet, version) are ignored, as Confluent
// ignores what it does not use.
type schemaRequest struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []Reference `json:"references"`
	// ID asks for a given id, which only IMPORT mode allows.
	ID int `json:"id,omitempty"`
}

// decodeSchema reads a schema request and returns its record, canonical.
func decodeSchema(r *http.Request) (*schemaRecord, error) {
	var req schemaRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		return nil, errBadRequest(err)
	}
	if req.ID > 0 {
		// Confluent's answer outside IMPORT mode, which this registry
		// does not implement: a client asking for an id must not get
		// another one silently.
		return nil, &apiError{http.StatusUnprocessableEntity, 42205, fmt.Sprintf("Subject %s is not in import mode", r.PathValue("subject"))}
	}
	typ := req.SchemaType
	if typ == "" {
		typ = typeAvro
	}
	if typ != typeAvro && typ != typeProtobuf && typ != typeJSON {
		return nil, &apiError{http.StatusUnprocessableEntity, http.StatusUnprocessableEntity, fmt.Sprintf("Invalid schemaType %s", typ)}
	}
	return &schemaRecord{Type: typ, Schema: canonical(typ, req.Schema), References: req.References}, nil
}

// resolveRefVersions turns reference version -1 (latest) into the number
// it stands for now, as Confluent stores references with fixed versions.
func (st *state) resolveRefVersions(rec *schemaRecord) {
	for i, ref := range rec.References {
		if ref.Version == -1 {
			if live := st.Subjects[ref.Subject].live(false); len(live) > 0 {
				rec.References[i].Version = live[len(live)-1].Version
			}
		}
	}
}
