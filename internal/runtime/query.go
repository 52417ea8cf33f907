package runtime

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/eddy-streams/eddy/state"
)

// Interactive queries read a running task's committed state: its database,
// which holds only what committed transactions wrote (docs/design.md §3), never
// the write buffer of the open transaction. The task's goroutine keeps
// processing while a query reads; only closing the task (a revoke, a
// shutdown) waits for the queries in flight, through the task's view lock,
// which the per-record path never takes.

// ErrNotLocal is returned by a query for a task that does not run here (it
// moved, or is still restoring): ask its owner, or retry once the group
// settled.
var ErrNotLocal = errors.New("eddy: the task is not running on this instance")

// ErrNoRoutes is returned while the instance has not yet received an
// assignment that says where the group's tasks run (before its first
// rebalance completed).
var ErrNoRoutes = errors.New("eddy: the group's task placement is not known yet")

// ErrUnknownStore is wrapped by the error of a query that names no store of
// the topology.
var ErrUnknownStore = errors.New("eddy: unknown store")

// ErrNotQueryable is wrapped by the error of a query on a backend whose
// databases cannot be read from another goroutine (state.SharedReader).
var ErrNotQueryable = errors.New("eddy: the state backend does not serve queries")

// Routes say where each task of the group runs, as the leader's last
// assignment placed them. Every member's assignment carries them (Kafka
// Streams' partitionsByHost), so any instance can route a query for any
// key to the instance that owns it.
type Routes struct {
	// Partitions[s] is the number of tasks of sub-topology s.
	Partitions []int32
	// Hosts are the endpoints of the members that advertise one (a
	// process with several workers is one endpoint), sorted, each with
	// the active and standby tasks of its members.
	Hosts []HostTasks
}

// HostTasks are the tasks of one endpoint.
type HostTasks struct {
	Endpoint        string
	Active, Standby []TaskID
}

// Owner returns the endpoint that runs task id, if any does (none on
// nil Routes: no assignment yet).
func (r *Routes) Owner(id TaskID) (string, bool) {
	if r == nil {
		return "", false
	}
	for _, h := range r.Hosts {
		if slices.Contains(h.Active, id) {
			return h.Endpoint, true
		}
	}
	return "", false
}

// Endpoints returns every endpoint, sorted.
func (r *Routes) Endpoints() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.Hosts))
	for i, h := range r.Hosts {
		out[i] = h.Endpoint
	}
	return out
}

// buildRoutes is the leader's part: the endpoints of members with their
// tasks in this plan, merged per endpoint. Members without an endpoint
// are left out: their tasks have no route, and queries for them fail as
// unavailable.
func buildRoutes(tasks []taskSpec, members []memberState, active, standby [][]TaskID) *Routes {
	r := &Routes{}
	for _, t := range tasks {
		for int(t.id.Subtopology) >= len(r.Partitions) {
			r.Partitions = append(r.Partitions, 0)
		}
		r.Partitions[t.id.Subtopology] = max(r.Partitions[t.id.Subtopology], t.id.Partition+1)
	}
	byEndpoint := map[string]*HostTasks{}
	for i, m := range members {
		if m.endpoint == "" {
			continue
		}
		h := byEndpoint[m.endpoint]
		if h == nil {
			h = &HostTasks{Endpoint: m.endpoint}
			byEndpoint[m.endpoint] = h
		}
		h.Active = append(h.Active, active[i]...)
		if i < len(standby) {
			h.Standby = append(h.Standby, standby[i]...)
		}
	}
	for _, h := range byEndpoint {
		slices.SortFunc(h.Active, compareTaskIDs)
		slices.SortFunc(h.Standby, compareTaskIDs)
		r.Hosts = append(r.Hosts, *h)
	}
	sort.Slice(r.Hosts, func(i, j int) bool { return r.Hosts[i].Endpoint < r.Hosts[j].Endpoint })
	return r
}

// queries is an instance's registry of queryable tasks and the group's
// routes. Workers add a task once it is restored and running, and remove
// it when it closes.
type queries struct {
	mu     sync.RWMutex
	views  map[TaskID]*taskView
	routes atomic.Pointer[Routes]
	// unsupported is set once a task's database was not a SharedReader.
	unsupported atomic.Bool
}

func newQueries() *queries { return &queries{views: make(map[TaskID]*taskView)} }

// taskView is a running task's database as queries see it. mu is held
// shared by each query and exclusively by the task's close, so a database
// never closes under a read.
type taskView struct {
	mu sync.RWMutex
	db state.SharedReader // nil once the task closed
	// streamTime is the committed stream time of the task (a key-value
	// store with a TTL reads expiry against it).
	streamTime atomic.Int64
}

// add makes t queryable; a backend whose databases are not SharedReaders
// serves no queries.
func (q *queries) add(t *task) {
	if q == nil {
		return
	}
	r, ok := t.db.(state.SharedReader)
	if !ok {
		q.unsupported.Store(true)
		return
	}
	v := &taskView{db: r}
	v.streamTime.Store(t.committed.StreamTime)
	t.view = v
	q.mu.Lock()
	q.views[t.id] = v
	q.mu.Unlock()
}

// remove waits for t's queries in flight and makes it unqueryable; it is
// called before its database closes.
func (q *queries) remove(t *task) {
	v := t.view
	if q == nil || v == nil {
		return
	}
	q.mu.Lock()
	if q.views[t.id] == v {
		delete(q.views, t.id)
	}
	q.mu.Unlock()
	v.mu.Lock()
	v.db = nil
	v.mu.Unlock()
	t.view = nil
}

func (q *queries) setRoutes(r *Routes) { q.routes.Store(r) }

// read runs fn on task id's database, with the task held open.
func (q *queries) read(id TaskID, fn func(db state.SharedReader, streamTime int64) error) error {
	q.mu.RLock()
	v := q.views[id]
	q.mu.RUnlock()
	if v == nil {
		if q.unsupported.Load() {
			return ErrNotQueryable
		}
		return fmt.Errorf("task %s: %w", id, ErrNotLocal)
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.db == nil {
		return fmt.Errorf("task %s: %w", id, ErrNotLocal)
	}
	return fn(v.db, v.streamTime.Load())
}

// local returns the ids of the running tasks of sub-topology sub, sorted.
func (q *queries) local(sub int) []TaskID {
	q.mu.RLock()
	defer q.mu.RUnlock()
	var ids []TaskID
	for id := range q.views {
		if id.Subtopology == sub {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, compareTaskIDs)
	return ids
}

// Endpoint returns the endpoint this instance advertises ("" for none).
func (in *Instance) Endpoint() string { return in.cfg.Endpoint }

// Routes returns the group's routes as of the last assignment, or nil
// before the first.
func (in *Instance) Routes() *Routes { return in.queries.routes.Load() }

// Stores returns the names of the topology's stores (global stores
// excluded), sorted.
func (in *Instance) Stores() []string {
	var names []string
	for _, s := range in.plan.subs {
		names = append(names, s.storeNames...)
	}
	slices.Sort(names)
	return names
}

// storeSub returns the sub-topology of store, or an error naming the
// stores there are.
func (in *Instance) storeSub(store string) (int, error) {
	for _, s := range in.plan.subs {
		if _, ok := s.storeIndex[store]; ok {
			return s.index, nil
		}
	}
	return 0, fmt.Errorf("%w %q; the stores are %v", ErrUnknownStore, store, in.Stores())
}

// KeyTask returns the task that holds key in store: Config.Partitioner
// (Kafka's default unless the app says otherwise) of the key, over the
// task count of the store's sub-topology. It assumes the store is keyed like the records its
// sub-topology reads, which every store of the DSL is (an aggregation's
// key is its grouping key, a table's its topic's key); a window store's
// key is the record key, without the window.
func (in *Instance) KeyTask(store string, key []byte) (TaskID, error) {
	sub, err := in.storeSub(store)
	if err != nil {
		return TaskID{}, err
	}
	r := in.Routes()
	if r == nil || sub >= len(r.Partitions) || r.Partitions[sub] == 0 {
		return TaskID{}, ErrNoRoutes
	}
	return TaskID{Subtopology: sub, Partition: in.cfg.Partitioner.Partition(key, r.Partitions[sub])}, nil
}

// StoreTasks returns every task of store's sub-topology.
func (in *Instance) StoreTasks(store string) ([]TaskID, error) {
	sub, err := in.storeSub(store)
	if err != nil {
		return nil, err
	}
	r := in.Routes()
	if r == nil || sub >= len(r.Partitions) {
		return nil, ErrNoRoutes
	}
	ids := make([]TaskID, r.Partitions[sub])
	for p := range ids {
		ids[p] = TaskID{Subtopology: sub, Partition: int32(p)}
	}
	return ids, nil
}

// QueryGet reads key of store in task id, which must run here
// (ErrNotLocal otherwise). It returns the committed value and the task's
// committed stream time.
func (in *Instance) QueryGet(store string, id TaskID, key []byte) (value []byte, ok bool, streamTime int64, err error) {
	if _, err := in.storeSub(store); err != nil {
		return nil, false, 0, err
	}
	err = in.queries.read(id, func(db state.SharedReader, st int64) error {
		streamTime = st
		value, ok, err = db.SharedGet(store, key)
		return err
	})
	return value, ok, streamTime, err
}

// LocalTasks returns the tasks of store's sub-topology that run here and
// can be queried, sorted.
func (in *Instance) LocalTasks(store string) ([]TaskID, error) {
	sub, err := in.storeSub(store)
	if err != nil {
		return nil, err
	}
	return in.queries.local(sub), nil
}

// QueryScanTask calls fn for each committed entry of store with lower <=
// key < upper (nil upper: no bound) in task id, which must run here
// (ErrNotLocal otherwise), in key order; fn returning an error stops the
// scan and is returned.
func (in *Instance) QueryScanTask(store string, id TaskID, lower, upper []byte, fn func(streamTime int64, key, value []byte) error) error {
	if _, err := in.storeSub(store); err != nil {
		return err
	}
	return in.queries.read(id, func(db state.SharedReader, st int64) error {
		return db.SharedScan(store, lower, upper, func(k, v []byte) error { return fn(st, k, v) })
	})
}
