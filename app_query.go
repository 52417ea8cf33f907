package eddy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/eddy-streams/eddy/httpapi"
	"github.com/eddy-streams/eddy/internal/runtime"
	"github.com/eddy-streams/eddy/state"
)

// Interactive queries read the committed state of a running App's stores:
// what the last committed transaction of each task left in its database,
// never the uncommitted writes of the open one (docs/design.md §1: "state that
// is visible through queries equals the state after the last committed
// transaction"). An instance reads the tasks it runs; KeyOwner says which
// instance runs the others, and the HTTP routes (App.Handler) forward
// there, using the endpoints that Config.Endpoint advertises.

// ErrNotRunning is returned by a query before Run started the app or
// after it stopped.
var ErrNotRunning = errors.New("eddy: the app is not running")

// ErrNotLocal is wrapped by the error of a query for a key whose task does
// not run on this instance (see NotLocalError).
var ErrNotLocal = runtime.ErrNotLocal

// ErrUnavailable is wrapped by the error of a query that cannot be
// answered now but can be soon: the group's placement of tasks is not
// known yet (before the first rebalance completed) or a task is moving.
// Retry.
var ErrUnavailable = errors.New("eddy: the store is not available on any instance right now; retry")

// NotLocalError is returned for a key whose task runs elsewhere (or is
// moving, or restoring here): Owner is the endpoint of the instance that
// runs it, "" when no instance does at the moment.
type NotLocalError struct {
	Store string
	Task  TaskID
	Owner string
}

func (e *NotLocalError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("eddy: store %s: task %s runs on no instance right now (it is moving or restoring); retry", e.Store, e.Task)
	}
	return fmt.Sprintf("eddy: store %s: task %s runs on the instance at %s; ask it", e.Store, e.Task, e.Owner)
}

func (e *NotLocalError) Unwrap() error { return ErrNotLocal }

// KeyValueQuery reads a key-value store of a running app. Build it with
// QueryKeyValue; it is safe for concurrent use.
type KeyValueQuery[K, V any] struct {
	a    *App
	spec KeyValueStoreSpec[K, V]
}

// QueryKeyValue returns a reader of the key-value store spec of app.
func QueryKeyValue[K, V any](app *App, spec KeyValueStoreSpec[K, V]) *KeyValueQuery[K, V] {
	return &KeyValueQuery[K, V]{a: app, spec: spec}
}

// Get returns the committed value of k. A key whose task runs on another
// instance is a *NotLocalError naming it.
func (q *KeyValueQuery[K, V]) Get(k K) (V, bool, error) {
	var zero V
	kb, err := q.spec.keys.Serialize(nil, k)
	if err != nil {
		return zero, false, fmt.Errorf("eddy: store %s: encode key: %w", q.spec.name, err)
	}
	vb, ok, st, err := q.a.getRaw(q.spec.name, kb)
	if err != nil || !ok {
		return zero, false, err
	}
	v, live, err := q.spec.decodeValue(vb, st)
	if err != nil {
		return zero, false, fmt.Errorf("eddy: store %s: decode value: %w", q.spec.name, err)
	}
	if !live {
		return zero, false, nil
	}
	return v.(V), true, nil
}

// Prefix returns the committed entries, on the tasks that run on this
// instance, whose encoded key starts with the encoding of prefix, in key
// order. The HTTP route asks every instance. A failure (the app not
// running, an undecodable entry) is yielded once and ends the sequence.
func (q *KeyValueQuery[K, V]) Prefix(prefix K) iter.Seq2[KeyValue[K, V], error] {
	return func(yield func(KeyValue[K, V], error) bool) {
		p, err := q.spec.keys.Serialize(nil, prefix)
		if err != nil {
			yield(KeyValue[K, V]{}, fmt.Errorf("eddy: store %s: encode key: %w", q.spec.name, err))
			return
		}
		q.scan(p, prefixEnd(p), yield)
	}
}

// Range returns the committed entries, on the tasks that run on this
// instance, with from <= encoded key < to, in key order; failures as in
// Prefix.
func (q *KeyValueQuery[K, V]) Range(from, to K) iter.Seq2[KeyValue[K, V], error] {
	return func(yield func(KeyValue[K, V], error) bool) {
		lo, err := q.spec.keys.Serialize(nil, from)
		if err != nil {
			yield(KeyValue[K, V]{}, fmt.Errorf("eddy: store %s: encode key: %w", q.spec.name, err))
			return
		}
		hi, err := q.spec.keys.Serialize(nil, to)
		if err != nil {
			yield(KeyValue[K, V]{}, fmt.Errorf("eddy: store %s: encode key: %w", q.spec.name, err))
			return
		}
		q.scan(lo, hi, yield)
	}
}

func (q *KeyValueQuery[K, V]) scan(lo, hi []byte, yield func(KeyValue[K, V], error) bool) {
	entries, _, err := q.a.scanRaw(q.spec.name, lo, hi, math.MaxInt)
	if err != nil {
		yield(KeyValue[K, V]{}, err)
		return
	}
	for _, e := range entries {
		k, err := q.spec.keys.Deserialize(e.key)
		if err != nil {
			yield(KeyValue[K, V]{}, fmt.Errorf("eddy: store %s: decode key: %w", q.spec.name, err))
			return
		}
		v, live, err := q.spec.decodeValue(e.value, e.streamTime)
		if err != nil {
			yield(KeyValue[K, V]{}, fmt.Errorf("eddy: store %s: decode value: %w", q.spec.name, err))
			return
		}
		if live && !yield(KeyValue[K, V]{Key: k, Value: v.(V)}, nil) {
			return
		}
	}
}

// WindowQuery reads a window store of a running app. Build it with
// QueryWindows; it is safe for concurrent use.
type WindowQuery[K, V any] struct {
	a    *App
	spec WindowStoreSpec[K, V]
}

// QueryWindows returns a reader of the window store spec of app.
func QueryWindows[K, V any](app *App, spec WindowStoreSpec[K, V]) *WindowQuery[K, V] {
	return &WindowQuery[K, V]{a: app, spec: spec}
}

// Fetch returns k's committed windows that start in [from, to] (ms since
// the epoch, both inclusive as in Kafka Streams), in start order. A key
// whose task runs on another instance yields a *NotLocalError; a failure
// is yielded once and ends the sequence.
func (q *WindowQuery[K, V]) Fetch(k K, from, to int64) iter.Seq2[WindowEntry[K, V], error] {
	return func(yield func(WindowEntry[K, V], error) bool) {
		if d := q.a.stores[q.spec.name]; d != nil && d.query != nil && d.query.sessionSegment() > 0 {
			// A sliding aggregation's store: its windows are kept in the
			// session layout, with values the spec's serde cannot read.
			yield(WindowEntry[K, V]{}, fmt.Errorf("eddy: store %s keeps sliding windows in the session layout; read it with the HTTP windows route (/v1/stores/%s/keys/{key}/windows)", q.spec.name, q.spec.name))
			return
		}
		if d := q.a.stores[q.spec.name]; d != nil {
			if err := refuseSliced(d.query); err != nil {
				yield(WindowEntry[K, V]{}, err)
				return
			}
		}
		kb, err := q.spec.keys.Serialize(nil, k)
		if err != nil {
			yield(WindowEntry[K, V]{}, fmt.Errorf("eddy: store %s: encode key: %w", q.spec.name, err))
			return
		}
		// Collected first, then yielded: the scan holds the task's query
		// lock, which a slow loop body must not keep (it would hold up the
		// task's close, and so a rebalance).
		var entries []WindowEntry[K, V]
		err = q.a.fetchRaw(q.spec.name, 0, kb, from, to, false, func(start, _ int64, vb []byte) error {
			v, err := q.spec.values.Deserialize(vb)
			if err != nil {
				return fmt.Errorf("eddy: store %s: decode value: %w", q.spec.name, err)
			}
			entries = append(entries, WindowEntry[K, V]{Key: k, Start: start, Value: v})
			return nil
		})
		if err != nil {
			yield(WindowEntry[K, V]{}, err)
			return
		}
		for _, e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// windowRange is the raw range of a window store's windows that start in
// [from, to], and the visitor that keeps key's. Window store keys are
// [start, 8 bytes][key]: the range holds every key's windows.
func windowRange(from, to int64, key []byte, fn func(start, end int64, value []byte) error) (lo, hi []byte, visit func(k, v []byte) error) {
	lo = binary.BigEndian.AppendUint64(nil, uint64(from))
	if to < math.MaxInt64 {
		hi = binary.BigEndian.AppendUint64(nil, uint64(to+1))
	} else {
		hi = []byte{windowMetaPrefix} // every window, none of the metadata
	}
	return lo, hi, func(k, v []byte) error {
		if len(k) < 8 || !bytes.Equal(k[8:], key) {
			return nil
		}
		return fn(int64(binary.BigEndian.Uint64(k)), -1, v)
	}
}

// sessionRange is the raw range of a session-layout store that holds the
// windows starting in [from, to], and the visitor that keeps key's. Keys
// are [segment of the end, 8 bytes][uvarint key length][key][start, 8
// bytes], values [end, 8 bytes][value]: a window that starts at or after
// from ends there too, so it lies in from's segment or a later one.
func sessionRange(from, to, segment int64, key []byte, fn func(start, end int64, value []byte) error) (lo, hi []byte, visit func(k, v []byte) error) {
	lo = binary.BigEndian.AppendUint64(nil, uint64(from-from%segment))
	hi = []byte{sessionIndexPrefix} // every segment, none of the index or metadata
	return lo, hi, func(k, v []byte) error {
		rest := k[min(8, len(k)):]
		n, m := binary.Uvarint(rest)
		if m <= 0 || n > uint64(len(rest)-m) || uint64(len(rest)-m)-n != 8 || !bytes.Equal(rest[m:m+int(n)], key) || len(v) < 8 {
			return nil
		}
		start := int64(binary.BigEndian.Uint64(rest[m+int(n):]))
		if start < from || start > to {
			return nil
		}
		return fn(start, int64(binary.BigEndian.Uint64(v)), v[8:])
	}
}

// KeyOwner returns the endpoint of the instance that runs the task of
// key (encoded with the store's key serde) in store, and whether that is
// this instance; "" and false while no instance runs it.
func (a *App) KeyOwner(store string, key []byte) (endpoint string, local bool, err error) {
	inst, err := a.running()
	if err != nil {
		return "", false, err
	}
	id, err := inst.KeyTask(store, key)
	if err != nil {
		return "", false, queryErr(err)
	}
	ep, ok := inst.Routes().Owner(id)
	if !ok {
		return "", false, nil
	}
	return ep, ep == inst.Endpoint() && ep != "", nil
}

func (a *App) running() (*runtime.Instance, error) {
	inst := a.inst.Load()
	if inst == nil {
		return nil, ErrNotRunning
	}
	return inst, nil
}

// queryErr turns the runtime's errors into the package's.
func queryErr(err error) error {
	if errors.Is(err, runtime.ErrNoRoutes) {
		return fmt.Errorf("%w (%w)", ErrUnavailable, err)
	}
	return err
}

// getRaw reads key in store's task that holds it, on this instance: the
// byte-level read under Get and the HTTP route.
func (a *App) getRaw(store string, key []byte) (value []byte, ok bool, streamTime int64, err error) {
	inst, err := a.running()
	if err != nil {
		return nil, false, 0, err
	}
	id, err := inst.KeyTask(store, key)
	if err != nil {
		return nil, false, 0, queryErr(err)
	}
	value, ok, streamTime, err = inst.QueryGet(store, id, key)
	if errors.Is(err, runtime.ErrNotLocal) {
		return nil, false, 0, a.notLocal(inst, store, id)
	}
	return value, ok, streamTime, err
}

func (a *App) notLocal(inst *runtime.Instance, store string, id runtime.TaskID) error {
	owner, ok := inst.Routes().Owner(id)
	if !ok || owner == inst.Endpoint() {
		owner = "" // nowhere, or here but still restoring
	}
	return &NotLocalError{Store: store, Task: taskIDOf(id), Owner: owner}
}

// rawEntry is one entry of a byte-level scan.
type rawEntry struct {
	key, value []byte
	streamTime int64
}

// scanRaw reads the entries of store in [lo, hi) (nil hi: no bound) of
// the tasks that run here, at most limit of them, in key order. It
// returns the tasks it read.
func (a *App) scanRaw(store string, lo, hi []byte, limit int) ([]rawEntry, []runtime.TaskID, error) {
	inst, err := a.running()
	if err != nil {
		return nil, nil, err
	}
	local, err := inst.LocalTasks(store)
	if err != nil {
		return nil, nil, err
	}
	var entries []rawEntry
	var tasks []runtime.TaskID
	for _, id := range local {
		// A task's entries come in key order, so each task stops one past
		// limit: the merged answer needs no more, and knows it is cut.
		n := 0
		err := inst.QueryScanTask(store, id, lo, hi, func(st int64, k, v []byte) error {
			if n > limit {
				return errStopScan
			}
			n++
			entries = append(entries, rawEntry{key: bytes.Clone(k), value: bytes.Clone(v), streamTime: st})
			return nil
		})
		switch {
		case errors.Is(err, runtime.ErrNotLocal):
			continue // closed since it was listed: its owner answers
		case err != nil && err != errStopScan:
			return nil, nil, err
		}
		tasks = append(tasks, id)
	}
	slices.SortStableFunc(entries, func(x, y rawEntry) int { return bytes.Compare(x.key, y.key) })
	return entries, tasks, nil
}

// fetchRaw calls fn for key's windows that start in [from, to], with
// their end (-1 where the store does not keep it: a window store, whose
// windows have the size its spec says), read in the task that holds key,
// on this instance, or with everyTask in every task of the store that runs
// here. segment is 0 for a window store, the segment size of a store in
// the session layout (sessions, sliding windows).
func (a *App) fetchRaw(store string, segment int64, key []byte, from, to int64, everyTask bool, fn func(start, end int64, value []byte) error) error {
	inst, err := a.running()
	if err != nil {
		return err
	}
	var ids []runtime.TaskID
	if everyTask {
		if ids, err = inst.LocalTasks(store); err != nil {
			return err
		}
	} else {
		id, err := inst.KeyTask(store, key)
		if err != nil {
			return queryErr(err)
		}
		ids = []runtime.TaskID{id}
	}
	from = max(from, 0)
	if to < from {
		return nil
	}
	lo, hi, visit := windowRange(from, to, key, fn)
	if segment > 0 {
		lo, hi, visit = sessionRange(from, to, segment, key, fn)
	}
	for _, id := range ids {
		err = inst.QueryScanTask(store, id, lo, hi, func(_ int64, k, v []byte) error { return visit(k, v) })
		switch {
		case err == errStopScan:
			return nil
		case errors.Is(err, runtime.ErrNotLocal) && everyTask:
			continue // closed since it was listed
		case errors.Is(err, runtime.ErrNotLocal):
			return a.notLocal(inst, store, id)
		case err != nil:
			return err
		}
	}
	return nil
}

// prefixEnd is the smallest key after every key that starts with p, nil
// when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// httpQueries is the app as package httpapi's Queries: text keys parsed
// and values rendered by the stores' declarations, errors mapped to
// httpapi's.
type httpQueries struct{ a *App }

var _ httpapi.Queries = httpQueries{}

func (h httpQueries) Stores() []httpapi.StoreInfo {
	var out []httpapi.StoreInfo
	for name, d := range h.a.stores {
		kind := "unknown"
		if d.query != nil {
			kind = string(d.query.queryKind())
		}
		out = append(out, httpapi.StoreInfo{Name: name, Kind: kind})
	}
	slices.SortFunc(out, func(x, y httpapi.StoreInfo) int { return cmpString(x.Name, y.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// decl returns the store's declaration if it has one of kinds.
func (h httpQueries) decl(store string, kinds ...StoreKind) (storeQuery, error) {
	d := h.a.stores[store]
	if d == nil {
		names := make([]string, 0, len(h.a.stores))
		for n := range h.a.stores {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%w %q; the stores are %v", httpapi.ErrUnknownStore, store, names)
	}
	if d.query == nil {
		return nil, fmt.Errorf("%w: store %s was declared without a spec of package eddy, so queries cannot decode it", httpapi.ErrBadRequest, store)
	}
	if k := d.query.queryKind(); !slices.Contains(kinds, k) {
		hint := "use /v1/stores/" + store + "/keys/{key}"
		if k == WindowKind || k == SessionKind {
			hint = "use /v1/stores/" + store + "/keys/{key}/windows?from=T1&to=T2"
		}
		return nil, fmt.Errorf("%w: store %s is a %s store; %s", httpapi.ErrBadRequest, store, k, hint)
	}
	return d.query, nil
}

// httpErr maps the package's query errors to httpapi's: a task moving or
// restoring is transient (503, retry), a corrupt database is not.
func httpErr(err error) error {
	var nl *NotLocalError
	switch {
	case errors.As(err, &nl) && nl.Owner != "":
		return &httpapi.MovedError{Owner: nl.Owner}
	case errors.As(err, &nl), errors.Is(err, ErrUnavailable), errors.Is(err, ErrNotRunning):
		return fmt.Errorf("%w: %w", httpapi.ErrUnavailable, err)
	case errors.Is(err, runtime.ErrUnknownStore):
		return fmt.Errorf("%w: %w", httpapi.ErrUnknownStore, err)
	case errors.Is(err, state.ErrCorrupt):
		// Retrying cannot help until the task's database is rebuilt:
		// the route answers 500 and logs err, which names its files.
		return fmt.Errorf("%w: %w", httpapi.ErrCorrupt, err)
	}
	return err
}

func (h httpQueries) Get(_ context.Context, store, key string) (any, error) {
	q, err := h.decl(store, KeyValueKind)
	if err != nil {
		return nil, err
	}
	kb, err := q.parseKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: store %s: %w", httpapi.ErrBadRequest, store, err)
	}
	vb, ok, st, err := h.a.getRaw(store, kb)
	if err != nil {
		return nil, httpErr(err)
	}
	var v any
	if ok {
		if v, ok, err = q.decodeValue(vb, st); err != nil {
			return nil, fmt.Errorf("store %s: decode the value of %q: %w", store, key, err)
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w: store %s has no key %q", httpapi.ErrNotFound, store, key)
	}
	return v, nil
}

func (h httpQueries) Windows(_ context.Context, store, key string, from, to int64, everyTask bool) ([]httpapi.Window, error) {
	q, err := h.decl(store, WindowKind, SessionKind)
	if err != nil {
		return nil, err
	}
	if err := refuseSliced(q); err != nil {
		return nil, fmt.Errorf("%w: %w", httpapi.ErrBadRequest, err)
	}
	kb, err := q.parseKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: store %s: %w", httpapi.ErrBadRequest, store, err)
	}
	var out []httpapi.Window
	size := q.windowSize()
	err = h.a.fetchRaw(store, q.sessionSegment(), kb, from, to, everyTask, func(start, end int64, vb []byte) error {
		v, _, err := q.decodeValue(vb, 0)
		if err != nil {
			return fmt.Errorf("store %s: decode a window of %q: %w", store, key, err)
		}
		w := httpapi.Window{Start: start, End: end, Value: v}
		if end < 0 { // a window store: its spec knows the size, or not
			w.End = 0
			if size > 0 {
				w.End = start + size
			}
		}
		out = append(out, w)
		if len(out) > httpapi.MaxScanLimit {
			return fmt.Errorf("%w: more than %d windows; narrow from/to", httpapi.ErrBadRequest, httpapi.MaxScanLimit)
		}
		return nil
	})
	if err != nil {
		return nil, httpErr(err)
	}
	return out, nil
}

func (h httpQueries) Scan(_ context.Context, store string, r httpapi.KeyRange, limit int) (httpapi.ScanResult, error) {
	var res httpapi.ScanResult
	q, err := h.decl(store, KeyValueKind)
	if err != nil {
		return res, err
	}
	var lo, hi []byte
	parse := func(what, s string) ([]byte, error) {
		if s == "" {
			return nil, nil
		}
		b, err := q.parseKey(s)
		if err != nil {
			return nil, fmt.Errorf("%w: store %s: %s: %w", httpapi.ErrBadRequest, store, what, err)
		}
		return b, nil
	}
	switch {
	case r.Key != "":
		// One key, in every task here: found wherever a producer's
		// partitioner put it.
		if lo, err = parse("key", r.Key); err != nil {
			return res, err
		}
		hi = append(bytes.Clone(lo), 0)
	case r.Prefix != "":
		if lo, err = parse("prefix", r.Prefix); err != nil {
			return res, err
		}
		hi = prefixEnd(lo)
	default:
		if lo, err = parse("from", r.From); err != nil {
			return res, err
		}
		if hi, err = parse("to", r.To); err != nil {
			return res, err
		}
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			return res, fmt.Errorf("%w: from %q is not before to %q", httpapi.ErrBadRequest, r.From, r.To)
		}
	}
	inst, err := h.a.running()
	if err != nil {
		return res, httpErr(err)
	}
	all, err := inst.StoreTasks(store)
	if err != nil {
		return res, httpErr(queryErr(err))
	}
	entries, tasks, err := h.a.scanRaw(store, lo, hi, limit)
	if err != nil {
		return res, httpErr(err)
	}
	res.Total = len(all)
	res.Entries = []httpapi.Entry{}
	for _, id := range tasks {
		res.Tasks = append(res.Tasks, id.String())
	}
	for _, e := range entries {
		v, live, err := q.decodeValue(e.value, e.streamTime)
		if err != nil {
			return res, fmt.Errorf("store %s: decode a value: %w", store, err)
		}
		if !live {
			continue
		}
		k, err := q.decodeKey(e.key)
		if err != nil {
			return res, fmt.Errorf("store %s: decode a key: %w", store, err)
		}
		if len(res.Entries) == limit {
			res.Truncated = true
			break
		}
		res.Entries = append(res.Entries, httpapi.Entry{Key: k, Value: v, Raw: e.key})
	}
	return res, nil
}

func (h httpQueries) Endpoints(store string) ([]string, string, error) {
	inst, err := h.a.running()
	if err != nil {
		return nil, "", httpErr(err)
	}
	if _, err := inst.StoreTasks(store); err != nil {
		if errors.Is(err, runtime.ErrUnknownStore) {
			_, derr := h.decl(store, KeyValueKind)
			return nil, "", derr
		}
		return nil, "", httpErr(queryErr(err))
	}
	return inst.Routes().Endpoints(), inst.Endpoint(), nil
}
