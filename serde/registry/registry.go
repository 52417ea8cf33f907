// Package registry is what every schema-registry-backed serde shares: a
// client of a Confluent-compatible schema registry (built on franz-go's
// sr.Client) that caches schemas by id and retries an unreachable
// registry within a bound, the subject name strategies, the writer's
// registration settings (auto-register, use-latest-version) and the
// Confluent wire format (magic byte 0, a big-endian 4-byte schema id, the
// payload).
//
// A format's serde (serde/avro) holds a *Client and asks it for a schema
// only the first time it sees an id: the per-record path makes no
// registry call. An id the registry does not know is remembered too, for
// Config.UnknownIDTTL, so that a flood of records carrying it makes one call.
package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy/serde"
)

// DefaultTimeout is Config.Timeout's default: as long as eddy waits for
// unreachable brokers (eddy.DefaultBrokerTimeout).
const DefaultTimeout = 2 * time.Minute

// Config says how to reach a schema registry.
type Config struct {
	// URLs of the registry; each request tries them in order.
	// Default http://localhost:8081, as Confluent's clients.
	URLs []string
	// Username and Password, if Username is set, authenticate with HTTP
	// basic auth (Confluent Cloud's API key and secret).
	Username, Password string
	// BearerToken, if set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// TLS configures https URLs (a private CA, a client certificate).
	TLS *tls.Config
	// Logger receives the warnings about an unreachable registry.
	// Default slog.Default().
	Logger *slog.Logger
	// Timeout bounds how long a request is retried, with backoff, while
	// the registry is unreachable, answers with a server error or refuses
	// the credentials; then the serde's error wraps serde.ErrUnavailable
	// and the app stops. Default DefaultTimeout.
	Timeout time.Duration
	// UnknownIDTTL is how long the client remembers that the registry
	// does not know a schema id: records carrying it meanwhile fail at
	// once (each one a decode error, the record's fault) instead of each
	// asking the registry again; then it asks again. Default
	// DefaultUnknownIDTTL; negative: never remembered, every such record
	// asks.
	UnknownIDTTL time.Duration
}

// DefaultUnknownIDTTL is Config.UnknownIDTTL's default. It is short: a
// record remembered as unknown is dead-lettered (or skipped, as the error
// policy says) without asking, so a long window would send good records
// of a schema a lagging registry replica learns a moment later to the
// dead-letter topic, while a flood of one bogus id still makes only one
// request a second.
const DefaultUnknownIDTTL = time.Second

// Client is a schema registry client with an id → schema cache. It is
// safe for concurrent use; share one between the serdes of an app, and
// Close it when the app has stopped.
type Client struct {
	sr      *sr.Client
	url     string // the URLs, for messages
	log     *slog.Logger
	timeout time.Duration
	now     func() time.Time // time.Now; a test moves it
	// unknownTTL is Config.UnknownIDTTL, 0 when unknown ids are not
	// remembered.
	unknownTTL time.Duration
	// firstBackoff is the const firstBackoff; a test lengthens it.
	firstBackoff time.Duration

	// done is cancelled by Close: it ends the retries in flight and
	// refuses later calls.
	done  context.Context
	close context.CancelFunc

	mu  sync.RWMutex
	ids map[int]sr.Schema
	// versions are the schemas fetched by subject and version (the
	// targets of references), which never change once registered.
	versions map[subjectVersion]sr.Schema
	// unknown are the ids the registry answered it does not know, with
	// when and its answer, kept for unknownTTL.
	unknown map[int]unknownID
	// flights are the ids being fetched: records decoded at once with the
	// same new id ask the registry once and share its answer, an error
	// included (so N of them wait one retry bound, not N one after
	// another), while other ids are fetched meanwhile.
	flights map[int]*flight
}

// unknownID is a remembered "no such id" answer.
type unknownID struct {
	at  time.Time
	err error // wraps ErrUnknownID
}

// flight is one fetch of a schema by id; done closes when s and err are
// set.
type flight struct {
	done chan struct{}
	s    sr.Schema
	err  error
}

// New returns a client of the registry cfg describes. It makes no
// request: a registry down at start is found by the first call (or by a
// serde's Check).
func New(cfg Config) (*Client, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("eddy: registry: Timeout %v: must be positive (0 is the default, %v)", cfg.Timeout, DefaultTimeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	urls := cfg.URLs
	if len(urls) == 0 {
		urls = []string{"http://localhost:8081"}
	}
	urls = append([]string(nil), urls...) // sr.URLs rewrites its argument
	opts := []sr.ClientOpt{sr.URLs(urls...), sr.UserAgent("eddy")}
	if cfg.Username != "" {
		opts = append(opts, sr.BasicAuth(cfg.Username, cfg.Password))
	}
	if cfg.BearerToken != "" {
		opts = append(opts, sr.BearerToken(cfg.BearerToken))
	}
	if cfg.TLS != nil {
		opts = append(opts, sr.DialTLSConfig(cfg.TLS))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("eddy: registry: %w", err)
	}
	done, closeFn := context.WithCancel(context.Background())
	unknownTTL := cfg.UnknownIDTTL
	switch {
	case unknownTTL == 0:
		unknownTTL = DefaultUnknownIDTTL
	case unknownTTL < 0:
		unknownTTL = 0
	}
	return &Client{sr: cl, url: strings.Join(urls, ","), log: cfg.Logger, timeout: cfg.Timeout, unknownTTL: unknownTTL, now: time.Now, firstBackoff: firstBackoff,
		done: done, close: closeFn,
		ids: map[int]sr.Schema{}, versions: map[subjectVersion]sr.Schema{}, unknown: map[int]unknownID{}, flights: map[int]*flight{}}, nil
}

// ErrClosed is wrapped by the errors of a Client's calls once Close was
// called, those it interrupted included. They wrap serde.ErrUnavailable
// too: a record that failed because the client was closed is not the
// record's fault, and no error policy skips or dead-letters it.
var ErrClosed = errors.New("the schema registry client is closed")

// Close ends the client's retries in flight (their calls return at once
// with an error wrapping ErrClosed and serde.ErrUnavailable) and makes
// every later call fail the same way, whether or not its answer is
// cached. (A serde keeps what it resolved itself: records carrying an id
// it has already met still decode without the client.) Call it once the
// app that uses the client has stopped, or earlier to abort an app stuck
// waiting for an unreachable registry: the app stops with that error, as
// with a registry down for longer than Config.Timeout. Calling it again
// does nothing; it always returns nil (it is an io.Closer).
func (c *Client) Close() error {
	c.close()
	return nil
}

// closedErr is the error of a call made or interrupted after Close.
func (c *Client) closedErr(what string) error {
	return fmt.Errorf("schema registry %s: %s: %w: %w", c.url, what, ErrClosed, serde.ErrUnavailable)
}

// URL names the registry, as the errors do.
func (c *Client) URL() string { return c.url }

// SchemaByID returns the schema registered under id. Only the first call
// for an id asks the registry. An id the registry does not know is an
// error wrapping ErrUnknownID (the record's fault); that answer is
// remembered for Config.UnknownIDTTL, then asked again (a replica of the
// registry that lags may know the id by then).
func (c *Client) SchemaByID(ctx context.Context, id int) (sr.Schema, error) {
	what := fmt.Sprintf("schema id %d", id)
	if c.done.Err() != nil {
		return sr.Schema{}, c.closedErr(what)
	}
	c.mu.RLock()
	s, ok := c.ids[id]
	c.mu.RUnlock()
	if ok {
		return s, nil
	}
	c.mu.Lock()
	if s, ok := c.ids[id]; ok {
		c.mu.Unlock()
		return s, nil
	}
	if u, ok := c.unknown[id]; ok {
		if c.now().Sub(u.at) < c.unknownTTL {
			c.mu.Unlock()
			return sr.Schema{}, u.err
		}
		delete(c.unknown, id)
	}
	if f, ok := c.flights[id]; ok { // another call is fetching it: share its answer
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.s, f.err
		case <-ctx.Done():
			return sr.Schema{}, fmt.Errorf("schema registry %s: %s: %w", c.url, what, ctx.Err())
		}
	}
	f := &flight{done: make(chan struct{})}
	c.flights[id] = f
	c.mu.Unlock()
	f.err = c.retry(ctx, what, func(ctx context.Context) (err error) {
		f.s, err = c.sr.SchemaByID(ctx, id)
		return err
	})
	c.mu.Lock()
	delete(c.flights, id)
	switch {
	case f.err == nil:
		c.ids[id] = f.s
	case errors.Is(f.err, ErrUnknownID) && c.unknownTTL > 0:
		c.rememberUnknown(id, f.err)
	}
	c.mu.Unlock()
	close(f.done)
	return f.s, f.err
}

// maxUnknown bounds the remembered unknown ids: adding one to a full map
// first forgets those remembered for longer than the TTL, then, if none
// was, one at random (it is asked again: a cache, not a record's fate).
const maxUnknown = 1024

// rememberUnknown keeps err as the answer for id; c.mu is held.
func (c *Client) rememberUnknown(id int, err error) {
	now := c.now()
	if len(c.unknown) >= maxUnknown {
		for old, u := range c.unknown {
			if now.Sub(u.at) >= c.unknownTTL {
				delete(c.unknown, old)
			}
		}
		for old := range c.unknown {
			if len(c.unknown) < maxUnknown {
				break
			}
			delete(c.unknown, old)
		}
	}
	c.unknown[id] = unknownID{at: now, err: err}
}

func (c *Client) cache(id int, s sr.Schema) {
	c.mu.Lock()
	c.ids[id] = s
	delete(c.unknown, id)
	c.mu.Unlock()
}

// Register registers s under subject (or finds it there) and returns its
// id. A schema the subject's compatibility rules refuse is an error
// wrapping ErrIncompatible with the registry's message.
func (c *Client) Register(ctx context.Context, subject string, s sr.Schema) (int, error) {
	var id int
	err := c.retry(ctx, fmt.Sprintf("register a schema under subject %q", subject), func(ctx context.Context) (err error) {
		id, err = c.sr.RegisterSchema(ctx, subject, s, -1, -1)
		return err
	})
	if err != nil {
		return 0, err
	}
	c.cache(id, s)
	return id, nil
}

// Lookup returns the id of s under subject, which must hold it already:
// otherwise the error wraps ErrNotRegistered.
func (c *Client) Lookup(ctx context.Context, subject string, s sr.Schema) (int, error) {
	var ss sr.SubjectSchema
	err := c.retry(ctx, fmt.Sprintf("look up a schema under subject %q", subject), func(ctx context.Context) (err error) {
		ss, err = c.sr.LookupSchema(ctx, subject, s)
		return err
	})
	if err != nil {
		return 0, err
	}
	c.cache(ss.ID, s)
	return ss.ID, nil
}

// Latest returns the latest version of subject's schema (Confluent's
// use.latest.version); a subject that does not exist wraps
// ErrNotRegistered.
func (c *Client) Latest(ctx context.Context, subject string) (sr.SubjectSchema, error) {
	var ss sr.SubjectSchema
	err := c.retry(ctx, fmt.Sprintf("latest schema of subject %q", subject), func(ctx context.Context) (err error) {
		ss, err = c.sr.SchemaByVersion(ctx, subject, -1)
		return err
	})
	if err != nil {
		return sr.SubjectSchema{}, err
	}
	c.cache(ss.ID, ss.Schema)
	return ss, nil
}

// Reference is a schema that another one references (a Protobuf import,
// an Avro named type defined in another schema), by the name the other
// one imports it under.
type Reference struct {
	Name   string
	Schema sr.Schema
}

// subjectVersion names a registered schema by subject and version.
type subjectVersion struct {
	subject string
	version int
}

// References returns the schemas s references, directly or through the
// ones it references, each once, every one after those it references
// itself: the order in which Avro's named types must be parsed. Each
// subject and version is asked of the registry once. A reference the
// registry does not hold is an error wrapping ErrNotRegistered (the
// schema's fault, so the fault of the record that names it); an
// unavailable registry, serde.ErrUnavailable.
func (c *Client) References(ctx context.Context, s sr.Schema) ([]Reference, error) {
	var out []Reference
	seen := map[string]bool{} // by name: a cycle of references ends
	var visit func(refs []sr.SchemaReference) error
	visit = func(refs []sr.SchemaReference) error {
		for _, r := range refs {
			if seen[r.Name] {
				continue
			}
			seen[r.Name] = true
			ref, err := c.schemaByVersion(ctx, subjectVersion{r.Subject, r.Version})
			if err != nil {
				return err
			}
			if err := visit(ref.References); err != nil {
				return err
			}
			out = append(out, Reference{Name: r.Name, Schema: ref})
		}
		return nil
	}
	if err := visit(s.References); err != nil {
		return nil, err
	}
	return out, nil
}

// schemaByVersion returns the schema registered as sv. A version below
// 1 (-1: the latest) is asked every time: it names no fixed schema.
func (c *Client) schemaByVersion(ctx context.Context, sv subjectVersion) (sr.Schema, error) {
	c.mu.RLock()
	s, ok := c.versions[sv]
	c.mu.RUnlock()
	if ok {
		return s, nil
	}
	var ss sr.SubjectSchema
	err := c.retry(ctx, fmt.Sprintf("schema of subject %q version %d", sv.subject, sv.version), func(ctx context.Context) (err error) {
		ss, err = c.sr.SchemaByVersion(ctx, sv.subject, sv.version)
		return err
	})
	if err != nil {
		return sr.Schema{}, err
	}
	if sv.version > 0 {
		c.mu.Lock()
		c.versions[sv] = ss.Schema
		c.mu.Unlock()
	}
	return ss.Schema, nil
}

// Errors of the registry that are answers, not unavailability: they are
// returned at once, wrapped with the registry's message.
var (
	// ErrUnknownID: the registry has no schema of that id (40403). A
	// record carrying it is bad input.
	ErrUnknownID = errors.New("schema id unknown to the registry")
	// ErrNotRegistered: the subject, or the schema under it, is not
	// registered (40401, 40402, 40403 on a lookup).
	ErrNotRegistered = errors.New("schema not registered")
	// ErrIncompatible: the registry refused to register a schema that
	// breaks the subject's compatibility rules (409) or is invalid (422).
	ErrIncompatible = errors.New("schema refused by the registry")
)

// Backoff between the attempts of a request to an unavailable registry.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 5 * time.Second
	warnEvery    = 30 * time.Second
)

// retry runs req until it succeeds, fails with an answer of the registry
// (returned at once, classified), or the registry stays unavailable for
// c.timeout (an error wrapping serde.ErrUnavailable and the last cause),
// or Close interrupts it (ErrClosed and serde.ErrUnavailable). It warns
// at the first failure and every warnEvery.
func (c *Client) retry(ctx context.Context, what string, req func(context.Context) error) error {
	if c.done.Err() != nil {
		return c.closedErr(what)
	}
	// Close cancels the request in flight and the wait between attempts.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.done, cancel)()
	start := time.Now()
	deadline := start.Add(c.timeout)
	backoff := c.firstBackoff
	var warned time.Time
	for attempt := 1; ; attempt++ {
		err := req(ctx)
		if err == nil {
			if !warned.IsZero() {
				c.log.Info("schema registry reachable again", "url", c.url, "request", what, "after", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if c.done.Err() != nil {
			return c.closedErr(what)
		}
		cause, unavailable := classify(err)
		if !unavailable {
			return fmt.Errorf("schema registry %s: %s: %w: %w", c.url, what, cause, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("schema registry %s: %s: %w", c.url, what, ctx.Err())
		}
		now := time.Now()
		if now.Sub(warned) >= warnEvery {
			warned = now
			c.log.Warn("schema registry unavailable; retrying", "url", c.url, "request", what, "attempt", attempt,
				"for", now.Sub(start).Round(time.Millisecond), "bound", c.timeout, "err", describe(err))
		}
		if now.Add(backoff).After(deadline) {
			return fmt.Errorf("schema registry %s: %s: %w for %v (%d attempts): %w", c.url, what, serde.ErrUnavailable,
				c.timeout, attempt, describe(err))
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if c.done.Err() != nil {
				return c.closedErr(what)
			}
			return fmt.Errorf("schema registry %s: %s: %w", c.url, what, ctx.Err())
		}
		backoff = max(min(2*backoff, maxBackoff), c.firstBackoff)
	}
}

// classify says whether err is the registry being unavailable (no answer,
// a server error, a timeout, credentials refused) or an answer (cause
// says which).
func classify(err error) (cause error, unavailable bool) {
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		return nil, true // no answer: connection refused, DNS, timeout
	}
	switch {
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden ||
		re.StatusCode >= 500 || re.StatusCode == http.StatusTooManyRequests || re.StatusCode == http.StatusRequestTimeout:
		return nil, true
	case re.StatusCode == http.StatusNotFound && re.ErrorCode/100 != 404:
		// Not a registry's answer (a wrong URL path, a proxy): taking it
		// for "unknown id" would dead-letter every record.
		return nil, true
	case re.ErrorCode == sr.ErrSchemaNotFound.Code && strings.Contains(re.URL, "/schemas/ids/"):
		return ErrUnknownID, false
	case re.StatusCode == http.StatusNotFound:
		return ErrNotRegistered, false
	case re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusUnprocessableEntity:
		return ErrIncompatible, false
	}
	return fmt.Errorf("refused (HTTP %d)", re.StatusCode), false
}

// describe makes refused credentials explicit: the registry's own message
// ("Unauthorized") rarely says they are the problem.
func describe(err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the registry refused the credentials (HTTP %d; check Username/Password or BearerToken): %w", re.StatusCode, err)
		}
		if re.StatusCode == http.StatusNotFound {
			return fmt.Errorf("HTTP 404 without a registry error code (is the URL a schema registry?): %w", err)
		}
		return fmt.Errorf("HTTP %d: %w", re.StatusCode, err)
	}
	return err
}
