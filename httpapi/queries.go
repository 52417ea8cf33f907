package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Queries is what the interactive query routes need of an app; eddy.App
// implements it. Its reads are of this instance's tasks only: the routes
// send a key to the instance that owns it, and a scan to every instance.
type Queries interface {
	// Stores lists the app's stores.
	Stores() []StoreInfo
	// Get returns the value of key in store, as a value encoding/json
	// renders. A key that another instance owns is a *MovedError.
	Get(ctx context.Context, store, key string) (any, error)
	// Windows returns key's windows of a window store that start in
	// [from, to] (ms since the epoch), in start order; a key that
	// another instance owns is a *MovedError. With everyTask it looks in
	// every task that runs here instead of the key's (for keys produced
	// with another partitioner than Kafka's default).
	Windows(ctx context.Context, store, key string, from, to int64, everyTask bool) ([]Window, error)
	// Scan returns at most limit entries of store in r, in key order, of
	// this instance's tasks, and which tasks it read.
	Scan(ctx context.Context, store string, r KeyRange, limit int) (ScanResult, error)
	// Endpoints returns the endpoints of every instance of the app that
	// runs tasks of store, and this instance's own.
	Endpoints(store string) (all []string, self string, err error)
}

// StoreInfo names a store and its kind ("key-value", "window", "session").
type StoreInfo struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// KeyRange selects keys for a scan: Key alone, if set; else those that
// start with Prefix, or else those in [From, To) (an empty bound is
// open).
type KeyRange struct {
	Key, Prefix, From, To string
}

// Window is one window of a key in a window store: its start and, when
// the store knows its size, its end (ms since the epoch).
type Window struct {
	Start int64 `json:"start"`
	End   int64 `json:"end,omitempty"`
	Value any   `json:"value"`
}

// ScanResult is one instance's part of a scan.
type ScanResult struct {
	Entries []Entry `json:"entries"`
	// Tasks are the tasks read, Total the number of tasks of the store.
	Tasks []string `json:"tasks"`
	Total int      `json:"total"`
	// Truncated is set when there were more entries than the limit.
	Truncated bool `json:"truncated"`
}

// Entry is a key and its value; Raw is the encoded key, which orders the
// entries of several instances (it is not part of the answer to a user).
type Entry struct {
	Key   any    `json:"key"`
	Value any    `json:"value"`
	Raw   []byte `json:"raw,omitempty"`
}

// Errors of Queries that the routes answer with their own status.
var (
	ErrUnknownStore = errors.New("unknown store")
	ErrNotFound     = errors.New("not found")
	ErrBadRequest   = errors.New("bad request")
	// ErrUnavailable means retry: the task that holds the key is moving
	// or restoring, or the group's placement is not known yet.
	ErrUnavailable = errors.New("unavailable")
	// ErrCorrupt means the state the query read is damaged on this
	// instance's disk: retrying does not help until the instance rebuilds
	// it. The answer is a 500 without Retry-After that says so and what
	// the operator does; the error itself, which names files, goes to the
	// log.
	ErrCorrupt = errors.New("state corrupt")
)

// An error of Queries that is none of the above is answered with a 500
// that says only that the query failed here (the error, which may name
// files or Go types, goes to Options.Logger): a client can do nothing
// with its text.

// MovedError says that another instance owns the key.
type MovedError struct {
	Owner string // its endpoint, host:port
}

func (e *MovedError) Error() string { return "the key is owned by the instance at " + e.Owner }

// ForwardedHeader marks a request that an instance forwarded to another:
// the receiver answers from its own tasks and never forwards it again.
const ForwardedHeader = "Eddy-Forwarded"

// Scan limits: the default and the most a request may ask for.
const (
	DefaultScanLimit = 100
	MaxScanLimit     = 10_000
)

// retryAfter is the Retry-After of a 503: about a rebalance's step.
const retryAfter = "1"

type queryRoutes struct {
	q      Queries
	log    *slog.Logger
	client *http.Client
	// scheme and token are what a forwarded request uses to reach and
	// authenticate to the other instances.
	scheme, token string
}

func (o Options) addQueryRoutes(mux *http.ServeMux) {
	if o.Queries == nil {
		return
	}
	qr := &queryRoutes{q: o.Queries, log: o.Logger, client: &http.Client{Timeout: 10 * time.Second}, scheme: "http", token: o.Token}
	if qr.log == nil {
		qr.log = slog.New(slog.DiscardHandler)
	}
	if o.PeerTLS != nil {
		qr.scheme = "https"
		qr.client.Transport = &http.Transport{TLSClientConfig: o.PeerTLS}
	}
	mux.HandleFunc("GET /v1/stores", qr.stores)
	mux.HandleFunc("GET /v1/stores/{store}/keys/{key}", qr.get)
	mux.HandleFunc("GET /v1/stores/{store}/keys/{key}/windows", qr.windows)
	mux.HandleFunc("GET /v1/stores/{store}/keys", qr.scan)
}

func (qr *queryRoutes) stores(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"stores": qr.q.Stores()})
}

// get reads the key on the instance that owns its partition by Kafka's
// default partitioner (here, or forwarded once). When the key is not
// there, its records may have been produced with another partitioner
// (librdkafka's default, CRC32, places keys elsewhere): every instance
// is then asked for it in all of its tasks before the answer is a 404.
func (qr *queryRoutes) get(w http.ResponseWriter, r *http.Request) {
	store, key := r.PathValue("store"), r.PathValue("key")
	v, err := qr.q.Get(r.Context(), store, key)
	forwarded := r.Header.Get(ForwardedHeader) != ""
	var moved *MovedError
	if errors.As(err, &moved) && !forwarded {
		resp, ferr := qr.forwardRequest(r.Context(), moved.Owner, r.URL.EscapedPath(), r.URL.RawQuery)
		if ferr != nil {
			w.Header().Set("Retry-After", retryAfter)
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the key's owner %s did not answer: %v; retry", moved.Owner, ferr))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get(notFoundHeader) == "" {
			relay(w, resp)
			return
		}
		err = fmt.Errorf("%w: store %s has no key %q", ErrNotFound, store, key)
	}
	if errors.Is(err, ErrNotFound) && !forwarded {
		res, ferr := qr.fanOut(r.Context(), store, KeyRange{Key: key}, 1, url.Values{"key": {key}, "limit": {"1"}}.Encode())
		switch {
		case ferr != nil && !errors.Is(ferr, ErrUnavailable):
			err = ferr // corrupt or failed somewhere: not a plain "not found"
		case ferr != nil:
			err = fmt.Errorf("%w; and not every instance could be asked whether another partition holds it: %w", err, ferr)
		case len(res.Entries) > 0:
			writeJSON(w, http.StatusOK, res.Entries[0].Value)
			return
		}
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			w.Header().Set(notFoundHeader, "1")
		}
		qr.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// notFoundHeader marks a 404 for a key (not for a store or a route), so
// the forwarding instance knows to look further.
const notFoundHeader = "Eddy-Key-Not-Found"

func (qr *queryRoutes) windows(w http.ResponseWriter, r *http.Request) {
	from, err := parseTime(r.URL.Query().Get("from"), 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "from: "+err.Error())
		return
	}
	to, err := parseTime(r.URL.Query().Get("to"), math.MaxInt64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "to: "+err.Error())
		return
	}
	if to < from {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("to %d is before from %d", to, from))
		return
	}
	store, key := r.PathValue("store"), r.PathValue("key")
	everyTask := r.URL.Query().Get("tasks") == "all"
	if r.Header.Get(ForwardedHeader) != "" {
		ws, err := qr.q.Windows(r.Context(), store, key, from, to, everyTask)
		if err != nil {
			qr.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, windowsAnswer{Key: key, Windows: orEmpty(ws)})
		return
	}
	ws, err := qr.q.Windows(r.Context(), store, key, from, to, false)
	var moved *MovedError
	if errors.As(err, &moved) {
		ws, err = qr.remoteWindows(r.Context(), moved.Owner, r.URL.EscapedPath(), r.URL.RawQuery)
	}
	if err != nil {
		qr.fail(w, r, err)
		return
	}
	if len(ws) == 0 {
		// As get: records produced with another partitioner than
		// Kafka's default sit in another task; ask every instance.
		ws, err = qr.windowsEverywhere(r, store, key, from, to)
		if err != nil {
			qr.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, windowsAnswer{Key: key, Windows: orEmpty(ws)})
}

type windowsAnswer struct {
	Key     string   `json:"key"`
	Windows []Window `json:"windows"`
}

func orEmpty(ws []Window) []Window {
	if ws == nil {
		return []Window{}
	}
	return ws
}

// remoteWindows asks owner for the windows of a key.
func (qr *queryRoutes) remoteWindows(ctx context.Context, owner, path, rawQuery string) ([]Window, error) {
	resp, err := qr.forwardRequest(ctx, owner, path, rawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: the key's owner %s did not answer: %w", ErrUnavailable, owner, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, owner, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, peerError(owner, resp, body)
	}
	var wire struct {
		Windows []struct {
			Start int64           `json:"start"`
			End   int64           `json:"end"`
			Value json.RawMessage `json:"value"`
		} `json:"windows"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, fmt.Errorf("%s: malformed windows answer: %w", owner, err)
	}
	var ws []Window
	for _, x := range wire.Windows {
		ws = append(ws, Window{Start: x.Start, End: x.End, Value: x.Value})
	}
	return ws, nil
}

// windowsEverywhere asks every instance for key's windows in all of its
// tasks, and merges them in start order.
func (qr *queryRoutes) windowsEverywhere(r *http.Request, store, key string, from, to int64) ([]Window, error) {
	all, self, err := qr.q.Endpoints(store)
	if err != nil {
		return nil, err
	}
	q := url.Values{"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}, "tasks": {"all"}}
	var ws []Window
	local := self == "" || !slices.Contains(all, self)
	for _, ep := range all {
		if ep == self {
			local = true
			continue
		}
		got, err := qr.remoteWindows(r.Context(), ep, r.URL.EscapedPath(), q.Encode())
		if err != nil {
			return nil, err
		}
		ws = append(ws, got...)
	}
	if local {
		got, err := qr.q.Windows(r.Context(), store, key, from, to, true)
		if err != nil {
			return nil, err
		}
		ws = append(ws, got...)
	}
	slices.SortStableFunc(ws, func(a, b Window) int { return cmpInt64(a.Start, b.Start) })
	return slices.CompactFunc(ws, func(a, b Window) bool { return a.Start == b.Start }), nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseTime reads ms since the epoch or an RFC 3339 time; empty is def.
func parseTime(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither ms since the epoch nor an RFC 3339 time (2006-01-02T15:04:05Z)", s)
	}
	return t.UnixMilli(), nil
}

// scan answers from this instance's tasks when forwarded; otherwise it
// asks every instance (itself directly) and merges their entries in key
// order.
func (qr *queryRoutes) scan(w http.ResponseWriter, r *http.Request) {
	store := r.PathValue("store")
	q := r.URL.Query()
	kr := KeyRange{Prefix: q.Get("prefix"), From: q.Get("from"), To: q.Get("to"), Key: q.Get("key")}
	if kr.Prefix != "" && (kr.From != "" || kr.To != "") {
		writeError(w, http.StatusBadRequest, "give either prefix or from/to, not both")
		return
	}
	limit := DefaultScanLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxScanLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: give 1 to %d", s, MaxScanLimit))
			return
		}
		limit = n
	}
	if r.Header.Get(ForwardedHeader) != "" {
		res, err := qr.q.Scan(r.Context(), store, kr, limit)
		if err != nil {
			qr.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	res, err := qr.fanOut(r.Context(), store, kr, limit, r.URL.RawQuery)
	if err != nil {
		qr.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// fanOut runs a scan on every instance (this one directly, the others
// through /v1/stores/{store}/keys?query, marked as forwarded) and merges
// their entries in key order. A scan that some task's owner did not
// answer for is ErrUnavailable: the union would silently miss that
// task's keys.
func (qr *queryRoutes) fanOut(ctx context.Context, store string, kr KeyRange, limit int, rawQuery string) (ScanResult, error) {
	all, self, err := qr.q.Endpoints(store)
	if err != nil {
		return ScanResult{}, err
	}
	path := "/v1/stores/" + url.PathEscape(store) + "/keys"
	results := make([]ScanResult, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, ep := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ep == self {
				results[i], errs[i] = qr.q.Scan(ctx, store, kr, limit)
				return
			}
			errs[i] = qr.forwardJSON(ctx, ep, path, rawQuery, &results[i])
		}()
	}
	wg.Wait()
	if self == "" || !slices.Contains(all, self) {
		// An instance without an endpoint (or not yet placed) still
		// answers for its own tasks.
		res, err := qr.q.Scan(ctx, store, kr, limit)
		results, errs = append(results, res), append(errs, err)
	}
	merged := ScanResult{Entries: []Entry{}, Tasks: []string{}}
	seen := map[string]bool{}
	for i, res := range results {
		if errs[i] != nil {
			if !errors.Is(errs[i], ErrUnavailable) {
				return ScanResult{}, errs[i] // retrying would not help
			}
			continue // its tasks are missing below: unavailable
		}
		merged.Total = max(merged.Total, res.Total)
		merged.Truncated = merged.Truncated || res.Truncated
		fresh := false
		for _, t := range res.Tasks {
			if seen[t] {
				continue // answered by two instances while it moved
			}
			seen[t], fresh = true, true
			merged.Tasks = append(merged.Tasks, t)
		}
		if fresh {
			merged.Entries = append(merged.Entries, res.Entries...)
		}
	}
	if len(seen) < merged.Total || merged.Total == 0 {
		err := fmt.Errorf("%w: %d of the store's %d tasks answered; the others are moving or restoring", ErrUnavailable, len(seen), merged.Total)
		if e := errors.Join(errs...); e != nil {
			err = fmt.Errorf("%w (%w)", err, e)
		}
		return ScanResult{}, err
	}
	slices.SortStableFunc(merged.Entries, func(a, b Entry) int { return bytes.Compare(a.Raw, b.Raw) })
	merged.Entries = slices.CompactFunc(merged.Entries, func(a, b Entry) bool { return bytes.Equal(a.Raw, b.Raw) })
	if len(merged.Entries) > limit {
		merged.Entries, merged.Truncated = merged.Entries[:limit], true
	}
	for i := range merged.Entries {
		merged.Entries[i].Raw = nil
	}
	slices.Sort(merged.Tasks)
	return merged, nil
}

// fail answers err: a moved key is forwarded to its owner once (a
// forwarded request that finds the key moved again is a 503: ownership
// is changing), the other errors get their status and a JSON message.
func (qr *queryRoutes) fail(w http.ResponseWriter, r *http.Request, err error) {
	var moved *MovedError
	switch {
	case errors.As(err, &moved) && r.Header.Get(ForwardedHeader) == "":
		qr.forward(w, r, moved.Owner)
	case errors.As(err, &moved):
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusServiceUnavailable, "the key's task moved while the request was forwarded; retry")
	case errors.Is(err, ErrCorrupt):
		qr.log.Error("query: state corrupt", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("store %s: this instance's copy of the store's state is corrupt (a damaged file on its disk), so retrying will not help; "+
			"the operator restarts the instance, which then rebuilds the damaged task database from its changelog; the instance's log has the details", r.PathValue("store")))
	case errors.As(err, new(*failedPeer)):
		writeError(w, http.StatusInternalServerError, err.Error())
	case errors.Is(err, ErrUnknownStore), errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrBadRequest):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrUnavailable):
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, context.Canceled):
		writeError(w, 499, "the request was cancelled")
	default:
		qr.log.Error("query failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "the query failed on this instance with an internal error; the instance's log has the details")
	}
}

// failedPeer is another instance's answer that retrying will not change:
// a 5xx without Retry-After (its state is corrupt, or it failed). Its
// message is that instance's own answer, already free of its internals.
type failedPeer struct {
	owner, status, msg string
}

func (e *failedPeer) Error() string {
	return fmt.Sprintf("the instance at %s answered %s: %s", e.owner, e.status, e.msg)
}

// peerError classifies another instance's answer that is not a 200: by
// its status, and for a 5xx by whether it says to retry.
func peerError(owner string, resp *http.Response, body []byte) error {
	var e struct{ Error string }
	_ = json.Unmarshal(body, &e)
	msg := strings.TrimSpace(e.Error)
	err := fmt.Errorf("%s answered %s: %s", owner, resp.Status, msg)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %w", ErrUnknownStore, err)
	case resp.StatusCode == http.StatusBadRequest:
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	case resp.StatusCode >= 500 && resp.Header.Get("Retry-After") == "":
		return &failedPeer{owner: owner, status: resp.Status, msg: msg}
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (qr *queryRoutes) forwardRequest(ctx context.Context, owner, escapedPath, rawQuery string) (*http.Response, error) {
	u := qr.scheme + "://" + owner + escapedPath
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(ForwardedHeader, "1")
	if qr.token != "" {
		req.Header.Set("Authorization", "Bearer "+qr.token)
	}
	return qr.client.Do(req)
}

// forward relays the request to owner and its answer back.
func (qr *queryRoutes) forward(w http.ResponseWriter, r *http.Request, owner string) {
	resp, err := qr.forwardRequest(r.Context(), owner, r.URL.EscapedPath(), r.URL.RawQuery)
	if err != nil {
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the key's owner %s did not answer: %v; retry", owner, err))
		return
	}
	defer resp.Body.Close()
	relay(w, resp)
}

func relay(w http.ResponseWriter, resp *http.Response) {
	for _, h := range []string{"Content-Type", "Retry-After", notFoundHeader} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// forwardJSON asks owner for its part of a scan.
func (qr *queryRoutes) forwardJSON(ctx context.Context, owner, path, rawQuery string, out *ScanResult) error {
	resp, err := qr.forwardRequest(ctx, owner, path, rawQuery)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, owner, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, owner, err)
	}
	if resp.StatusCode != http.StatusOK {
		return peerError(owner, resp, body)
	}
	// Keys and values stay as the owner rendered them (RawMessage: a
	// float64 would round large integers).
	var wire struct {
		Entries []struct {
			Key   json.RawMessage `json:"key"`
			Value json.RawMessage `json:"value"`
			Raw   []byte          `json:"raw"`
		} `json:"entries"`
		Tasks     []string `json:"tasks"`
		Total     int      `json:"total"`
		Truncated bool     `json:"truncated"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return fmt.Errorf("%s: malformed scan answer: %w", owner, err)
	}
	out.Tasks, out.Total, out.Truncated = wire.Tasks, wire.Total, wire.Truncated
	for _, e := range wire.Entries {
		out.Entries = append(out.Entries, Entry{Key: e.Key, Value: e.Value, Raw: e.Raw})
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // an API, not a page: "&" stays "&"
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		_ = enc.Encode(map[string]string{"error": "render the answer as JSON: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
