// Package kafka is eddy's wiring to the Kafka protocol: the embedded
// broker (franz-go's kfake with a data directory), topic administration
// and Kafka-compatible partitioning. The runtime talks to real Kafka and to
// the embedded broker through the same code; only StartBroker knows which
// one it is.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Settings of the embedded broker. They are constants rather than options
// because eddy's tests and its users should see the same broker. As in
// Kafka, a dynamic broker config set through AlterConfigs (persisted in
// the data dir) overrides the session timeout bounds.
const (
	// defaultPartitions is the partition count of auto-created topics
	// when BrokerConfig.DefaultPartitions is zero. kfake's own default
	// is 10; four keeps a one-machine demo's task count small.
	defaultPartitions = 4

	// minSessionTimeout is lower than kfake's and Kafka's 6s default so
	// tests can use short classic-group session timeouts and see a dead
	// member evicted within a second.
	minSessionTimeout = time.Second

	// maxSessionTimeout is Kafka's default group.max.session.timeout.ms.
	maxSessionTimeout = 5 * time.Minute
)

// BrokerConfig configures StartBroker. The zero value is a usable
// in-memory broker on a free loopback port.
type BrokerConfig struct {
	// Addr is the host:port to listen on, e.g. "127.0.0.1:9092". Port 0
	// picks any free port. The listener's address is also what the
	// broker advertises in metadata, so it must be reachable by clients:
	// an unspecified host (0.0.0.0) only works for clients on this
	// machine. Default "127.0.0.1:0".
	Addr string

	// DataDir is the persistence directory (kfake.DataDir). If it holds
	// state from an earlier run, the broker resumes from it. "" keeps
	// everything in memory and loses it on Close.
	DataDir string

	// SyncWrites fsyncs every produced batch and every group and
	// producer-state log entry before acknowledging it (kfake.SyncWrites).
	// Without it, data reaches disk at segment roll and Close, so a
	// machine crash (not a process kill) can lose acknowledged records.
	// `eddy broker` enables it. Default false.
	SyncWrites bool

	// DefaultPartitions is the partition count of auto-created topics and
	// of topics created with a partition count of -1. Default 4.
	DefaultPartitions int32

	// Logger receives kfake's log lines at their levels. nil discards.
	Logger *slog.Logger

	// TLS, when set, makes the broker accept only TLS connections with
	// this server configuration (set ClientAuth and ClientCAs for mTLS).
	TLS *tls.Config

	// Users, when set, turns SASL on: a client must authenticate as one
	// of them, with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (each user gets
	// all three). Without ACLs every user may do everything.
	Users []User

	// ACLs turns authorization on: a user may do only what ACLs allow
	// (create them with the Kafka admin API, e.g. CreateACLs, as a
	// superuser), except the users named in SuperUsers, who may do
	// everything. Needs Users.
	ACLs       bool
	SuperUsers []string

	// Advertise, when set, is the host:port the broker names in metadata
	// instead of its listener's address: the address of a TCP proxy in
	// front of it (eddy chaos cuts the network there). "" advertises the
	// listener.
	Advertise string
}

// User is a SASL user of the embedded broker.
type User struct {
	Name, Password string
}

func (cfg BrokerConfig) checkUsers() error {
	var errs []error
	names := map[string]bool{}
	for _, u := range cfg.Users {
		if u.Name == "" || u.Password == "" {
			errs = append(errs, fmt.Errorf("kafka: BrokerConfig.Users: user %q: a SASL user needs a name and a password", u.Name))
		}
		names[u.Name] = true
	}
	if cfg.ACLs && len(cfg.Users) == 0 {
		errs = append(errs, errors.New("kafka: BrokerConfig.ACLs needs Users: ACLs name SASL users"))
	}
	for _, s := range cfg.SuperUsers {
		if !names[s] {
			errs = append(errs, fmt.Errorf("kafka: BrokerConfig.SuperUsers: %q is not one of the Users", s))
		}
	}
	return errors.Join(errs...)
}

// Broker is a running single-node embedded broker.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
	dataDir string
	logger  *slog.Logger

	closeOnce sync.Once
}

// StartBroker starts a single-node Kafka-protocol broker listening on
// cfg.Addr, with automatic topic creation enabled as in Kafka's default
// configuration. It returns once the broker accepts connections and, with
// a DataDir, has loaded any earlier state.
func StartBroker(cfg BrokerConfig) (*Broker, error) {
	if cfg.DefaultPartitions < 0 {
		return nil, fmt.Errorf("kafka: BrokerConfig.DefaultPartitions is %d, want 0 (default %d) or more", cfg.DefaultPartitions, defaultPartitions)
	}
	if cfg.DefaultPartitions == 0 {
		cfg.DefaultPartitions = defaultPartitions
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}

	// We listen ourselves instead of passing kfake.Ports: kfake always
	// listens on 127.0.0.1, and we want the caller's host, plus the
	// resolved port before the cluster starts.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("kafka: listen on %s: %w", cfg.Addr, err)
	}
	var handedOut bool
	listen := func(string, string) (net.Listener, error) {
		// kfake calls this once per broker node; we run one node.
		if handedOut {
			return nil, errors.New("kafka: embedded broker runs a single node")
		}
		handedOut = true
		if cfg.Advertise != "" {
			// kfake advertises its listener's Addr().
			return advertisedListener{ln, cfg.Advertise}, nil
		}
		return ln, nil
	}

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(listen),
		kfake.ClusterID("eddy"),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(cfg.DefaultPartitions)),
		kfake.GroupMinSessionTimeout(minSessionTimeout),
		kfake.GroupMaxSessionTimeout(maxSessionTimeout),
		// transaction.max.timeout.ms is left at kfake's default, which
		// is Kafka's: 15 minutes. kfake rejects an InitProducerID asking
		// for more with INVALID_TRANSACTION_TIMEOUT, as Kafka does, and
		// aborts (and fences) a transaction open longer than the
		// producer's own timeout.
		kfake.WithLogger(slogAdapter{cfg.Logger}),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if cfg.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	if cfg.TLS != nil {
		opts = append(opts, kfake.TLS(cfg.TLS))
	}
	if err := cfg.checkUsers(); err != nil {
		ln.Close()
		return nil, err
	}
	if len(cfg.Users) > 0 {
		opts = append(opts, kfake.EnableSASL())
		super := map[string]bool{}
		for _, name := range cfg.SuperUsers {
			super[name] = true
		}
		for _, u := range cfg.Users {
			for _, m := range SASLMechanisms {
				if cfg.ACLs && !super[u.Name] {
					opts = append(opts, kfake.User(m, u.Name, u.Password))
				} else {
					opts = append(opts, kfake.Superuser(m, u.Name, u.Password))
				}
			}
		}
	}
	if cfg.ACLs {
		opts = append(opts, kfake.EnableACLs())
	}

	c, err := kfake.NewCluster(opts...)
	if err != nil {
		ln.Close() // kfake closes it too, unless it failed before taking it
		return nil, fmt.Errorf("kafka: start embedded broker: %w", err)
	}
	return &Broker{
		cluster: c,
		addr:    ln.Addr().String(),
		dataDir: cfg.DataDir,
		logger:  cfg.Logger,
	}, nil
}

// Addr returns the address clients dial, with the port resolved when
// BrokerConfig.Addr asked for port 0.
func (b *Broker) Addr() string { return b.addr }

// Cluster returns the underlying kfake cluster, for tests that inject
// faults (Fault) or intercept requests (Control).
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the broker: it stops accepting connections, writes its
// state to the data directory, and fsyncs every file and directory there.
// kfake itself skips the fsync of segment files unless SyncWrites is on,
// and never fsyncs directories after its renames; we do both so that a
// clean stop survives a power loss, not only a process restart. Close is
// idempotent.
func (b *Broker) Close() {
	b.closeOnce.Do(func() {
		b.cluster.Close()
		if b.dataDir == "" {
			return
		}
		if err := syncTree(b.dataDir); err != nil && b.logger != nil {
			b.logger.Error("kafka: sync data dir after close", "dir", b.dataDir, "err", err)
		}
	})
}

// syncTree fsyncs every regular file and directory under root. Errors do
// not stop the walk: one unsyncable file should not leave the others
// unsynced.
func syncTree(root string) error {
	var errs []error
	walkErr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		if err := syncPath(path); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	return errors.Join(append(errs, walkErr)...)
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// slogAdapter turns kfake's printf-style Logger into slog records, so the
// broker's lines go wherever the rest of eddy logs, filtered by the same
// level.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	if a.l == nil {
		return
	}
	var sl slog.Level
	switch level {
	case kfake.LogLevelError:
		sl = slog.LevelError
	case kfake.LogLevelWarn:
		sl = slog.LevelWarn
	case kfake.LogLevelInfo:
		sl = slog.LevelInfo
	case kfake.LogLevelDebug:
		sl = slog.LevelDebug
	default:
		return
	}
	ctx := context.Background()
	// Formatting is the expensive part; skip it for filtered levels.
	if !a.l.Enabled(ctx, sl) {
		return
	}
	a.l.Log(ctx, sl, fmt.Sprintf(format, args...), "component", "kfake")
}

// advertisedListener is a listener whose Addr is another address: kfake
// names its listener's Addr in metadata, and a broker behind a proxy must
// name the proxy.
type advertisedListener struct {
	net.Listener
	addr string
}

func (l advertisedListener) Addr() net.Addr { return advertisedAddr(l.addr) }

type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }
