package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerFault is one fault to install in the embedded broker through its
// fault API (`eddy broker --fault-api ADDR`): the next Count requests of kind
// Key are answered with Error instead of their real answer. kfake applies
// the request anyway, and answers the error after it, for Produce with
// REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND and for
// TxnOffsetCommit with REQUEST_TIMED_OUT; every other error rejects the
// request before the broker acts on it.
type BrokerFault struct {
	// Key is the request kind as kmsg names it, e.g. "EndTxn",
	// "TxnOffsetCommit", "Produce", "Fetch", "InitProducerID".
	Key string `json:"key"`
	// Error is the Kafka error code name, e.g. "NOT_COORDINATOR",
	// "CONCURRENT_TRANSACTIONS", "REQUEST_TIMED_OUT".
	Error string `json:"error"`
	// Count is how many requests to fail (0: one).
	Count int `json:"count"`
	// TopLevel fails the request's top-level error code rather than each
	// partition's (EndTxn and InitProducerID have only a top-level one).
	TopLevel bool `json:"top_level"`
}

// requestKey returns the kmsg key named name.
func requestKey(name string) (kmsg.Key, error) {
	for k := int16(0); k < 200; k++ {
		if kmsg.NameForKey(k) == name {
			return kmsg.Key(k), nil
		}
	}
	return 0, fmt.Errorf("chaos: unknown request kind %q: give a kmsg name such as EndTxn, Produce or Fetch", name)
}

// errorCode returns the Kafka error named name.
func errorCode(name string) (*kerr.Error, error) {
	for c := int16(-1); c < 200; c++ {
		if e := kerr.TypedErrorForCode(c); e != nil && e.Message == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("chaos: unknown Kafka error %q: give a name such as NOT_COORDINATOR or REQUEST_TIMED_OUT", name)
}

// FaultAPI serves the embedded broker's fault injection over HTTP, for
// chaos testing only: POST /faults with a BrokerFault installs it and
// answers {"id": N}; GET /faults/N answers {"hits": H}, the requests it
// answered so far; DELETE /faults/N removes it (answering its hits). There is no authentication: serve it on loopback.
type FaultAPI struct {
	c *kfake.Cluster

	mu     sync.Mutex
	next   int
	faults map[int]*kfake.FaultHandle
}

// NewFaultAPI serves faults for c.
func NewFaultAPI(c *kfake.Cluster) *FaultAPI {
	return &FaultAPI{c: c, faults: map[int]*kfake.FaultHandle{}}
}

func (a *FaultAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/faults":
		var f BrokerFault
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&f); err != nil {
			http.Error(w, "chaos: fault: "+err.Error(), http.StatusBadRequest)
			return
		}
		id, err := a.install(f)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]int{"id": id})
	case (r.Method == http.MethodGet || r.Method == http.MethodDelete) && strings.HasPrefix(r.URL.Path, "/faults/"):
		id, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/faults/"))
		a.mu.Lock()
		h := a.faults[id]
		a.mu.Unlock()
		if err != nil || h == nil {
			http.Error(w, "chaos: no such fault", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodDelete {
			h.Remove()
		}
		_ = json.NewEncoder(w).Encode(map[string]int{"hits": h.Hits()})
	default:
		http.Error(w, "chaos: POST /faults, GET or DELETE /faults/ID", http.StatusNotFound)
	}
}

func (a *FaultAPI) install(f BrokerFault) (int, error) {
	key, err := requestKey(f.Key)
	if err != nil {
		return 0, err
	}
	e, err := errorCode(f.Error)
	if err != nil {
		return 0, err
	}
	if f.Count < 0 {
		return 0, fmt.Errorf("chaos: fault count %d: give 1 or more (0 means 1)", f.Count)
	}
	h := a.c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: e, Count: f.Count, TopLevel: f.TopLevel})
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	a.faults[a.next] = h
	return a.next, nil
}

// ServeFaultAPI serves the fault API of c on ln until ctx is done.
func ServeFaultAPI(ctx context.Context, ln net.Listener, c *kfake.Cluster) error {
	srv := &http.Server{Handler: NewFaultAPI(c), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("chaos: fault API: %w", err)
	}
	return nil
}

// InstallFault installs f in the broker whose fault API is at addr and
// returns its id.
func InstallFault(ctx context.Context, addr string, f BrokerFault) (int, error) {
	body, _ := json.Marshal(f)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/faults", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	var out struct{ ID int }
	if err := doJSON(req, &out); err != nil {
		return 0, fmt.Errorf("chaos: install %s %s: %w", f.Key, f.Error, err)
	}
	return out.ID, nil
}

// FaultHits returns how many requests fault id answered.
func FaultHits(ctx context.Context, addr string, id int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/faults/%d", addr, id), nil)
	if err != nil {
		return 0, err
	}
	var out struct{ Hits int }
	if err := doJSON(req, &out); err != nil {
		return 0, fmt.Errorf("chaos: hits of fault %d: %w", id, err)
	}
	return out.Hits, nil
}

func doJSON(req *http.Request, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}

// RemoveFault removes fault id, if it has requests left to fail.
func RemoveFault(ctx context.Context, addr string, id int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("http://%s/faults/%d", addr, id), nil)
	if err != nil {
		return err
	}
	var out struct{ Hits int }
	if err := doJSON(req, &out); err != nil {
		return fmt.Errorf("chaos: remove fault %d: %w", id, err)
	}
	return nil
}
