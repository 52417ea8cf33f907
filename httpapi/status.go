package httpapi

import (
	"encoding/json"
	"net/http"
)

// StatusReporter is what the handler needs of a running instance for
// /readyz and /v1/status.
type StatusReporter interface {
	// Status returns a snapshot of the instance (its workers and tasks,
	// their states and restore progress), encoded as JSON as it is.
	Status() any
	// Ready reports whether every task assigned to the instance is
	// restored and running and, if not, why, with the tasks still
	// restoring.
	Ready() (ready bool, reason string, restoring []string)
}

// TopologyDescriber describes the app's topology for /v1/topology.
type TopologyDescriber interface {
	// Describe returns the topology's shape, encoded as JSON as it is.
	Describe() any
}

// readiness is the body of /readyz.
type readiness struct {
	Ready     bool     `json:"ready"`
	Reason    string   `json:"reason,omitempty"`
	Restoring []string `json:"restoring,omitempty"`
}

func serveReady(s StatusReporter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ready, reason, restoring := s.Ready()
		code := http.StatusOK
		if !ready {
			code = http.StatusServiceUnavailable
		}
		writeStatusJSON(w, code, readiness{Ready: ready, Reason: reason, Restoring: restoring})
	}
}

// serveJSON serves what get returns, freshly each request.
func serveJSON(get func() any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeStatusJSON(w, http.StatusOK, get())
	}
}

func writeStatusJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// Status changes from one second to the next: no cache may keep it.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
