// Package httpapi serves an eddy app over HTTP: metrics, health, state
// queries and the web UI. It knows the app only through the small
// interfaces in Options, so that each part can be tested alone.
package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Options are the parts the handler serves. A nil part is not served.
type Options struct {
	// Metrics serves GET /metrics (Prometheus text format).
	Metrics http.Handler
	// Queries serves the interactive queries of the app's state stores
	// (queries.go): GET /v1/stores, /v1/stores/{store}/keys/{key},
	// /v1/stores/{store}/keys?prefix=P (or from=A&to=B, limit=N) and
	// /v1/stores/{store}/keys/{key}/windows?from=T1&to=T2.
	Queries Queries
	// Token, when set, is a bearer token every request but /healthz and
	// /readyz must carry (auth.go); queries forwarded to other instances
	// carry it too, so give every instance the same.
	Token string
	// PeerTLS, when set, makes forwarded queries use HTTPS with this
	// client configuration: set it when the instances serve TLS.
	PeerTLS *tls.Config
	// Status serves GET /readyz and GET /v1/status.
	Status StatusReporter
	// Topology serves GET /v1/topology.
	Topology TopologyDescriber
	// UI serves the web UI at GET / (and its assets under /ui/).
	UI bool
	// Logger receives the errors that an answer only summarizes (a
	// corrupt store, an internal failure): they name files and types
	// that a client has no use for. Nil discards them.
	Logger *slog.Logger
}

// New returns the handler of an app's endpoints:
//
//	GET /healthz      200 while the process serves requests (liveness)
//	GET /metrics      Options.Metrics
//	GET /readyz       200 when every assigned task is restored and running,
//	                  503 otherwise, with the reason (JSON)
//	GET /v1/status    Options.Status: the instance's workers and tasks (JSON)
//	GET /v1/topology  Options.Topology: the topology's shape (JSON)
//	GET /             the web UI (Options.UI), assets under /ui/
//	GET /v1/stores/…  Options.Queries (queries.go)
//
// With Options.Token, every route but /healthz and /readyz needs it.
func New(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	if o.Status != nil {
		mux.Handle("GET /readyz", serveReady(o.Status))
		mux.Handle("GET /v1/status", serveJSON(o.Status.Status))
	}
	if o.Topology != nil {
		mux.Handle("GET /v1/topology", serveJSON(o.Topology.Describe))
	}
	if o.UI {
		index, assets := uiHandler()
		mux.Handle("GET /{$}", index)
		mux.Handle("GET /ui/", assets)
	}
	o.addQueryRoutes(mux)
	if o.Token != "" {
		return requireToken(o.Token, mux)
	}
	return mux
}

// Serve serves h on ln until ctx is cancelled, then shuts the server down,
// giving requests in flight up to 5 seconds. It returns nil after a
// shutdown and the server's error otherwise.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
