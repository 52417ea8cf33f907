package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/schemaregistry"
)

// runBroker is `eddy broker`: the embedded Kafka-protocol broker, durable
// in --data-dir, until SIGINT or SIGTERM.
func runBroker(ctx context.Context, args []string) error {
	return brokerMain(ctx, args, os.Stdout, os.Stderr)
}

// brokerMain is runBroker with its outputs as parameters, for tests.
// stdout gets the two lifecycle lines scripts wait for; stderr gets logs
// and -h.
func brokerMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eddy broker", flag.ContinueOnError)
	// The flag package prints parse errors itself; main prints ours, so
	// silence it and print the usage only when asked for.
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1:9092", "`host:port` to listen on and advertise to clients (port 0: any free port)")
	dataDir := fs.String("data-dir", "", "`directory` that keeps topics, offsets and transactions across restarts (required; created 0700 if missing)")
	syncWrites := fs.Bool("sync-writes", true, "fsync every produced batch before acknowledging it; false is faster but a machine crash can lose acknowledged records")
	partitions := fs.Int("partitions", 4, "partition `count` of auto-created topics")
	logLevel := fs.String("log-level", "info", "broker log `level`: debug, info, warn, error or none")
	logFormat := fs.String("log-format", "text", "broker log `format`: text (key=value) or json (one object per line)")
	tlsCert := fs.String("tls-cert", "", "PEM `file` of the broker's TLS certificate: with --tls-key, the broker accepts only TLS")
	tlsKey := fs.String("tls-key", "", "PEM `file` of the key of --tls-cert")
	tlsClientCA := fs.String("tls-client-ca", "", "PEM `file` of the CAs that sign client certificates: clients must present one (mTLS)")
	acls := fs.Bool("acls", false, "authorization on: users may do only what ACLs allow (create them with `eddy acls --apply` as a superuser); needs --sasl-users-file")
	superUsers := fs.String("super-users", "", "comma-separated `users` of --sasl-users-file who may do everything (and create ACLs)")
	usersFile := fs.String("sasl-users-file", "", "`file` of SASL users, one user:password per line: clients must authenticate (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
	advertise := fs.String("advertise", "", "`host:port` to name in metadata instead of --addr, e.g. a proxy in front of the broker (eddy chaos)")
	registryAddr := fs.String("schema-registry", "", "also serve a Confluent-compatible Schema Registry REST API on this `host:port` (kept in <data-dir>/schema-registry; TLS and --sasl-users-file users as HTTP basic auth apply to it too)")
	faultAPI := fs.String("fault-api", "", "for chaos testing only: serve fault injection over unauthenticated HTTP on this `host:port` (keep it on loopback)")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "usage: eddy broker --data-dir DIR [flags]\n\nflags:")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w (run 'eddy broker -h' for the flags)", err)
	}

	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected argument %q: eddy broker takes only flags", fs.Arg(0)))
	}
	if *dataDir == "" {
		problems = append(problems, errors.New("--data-dir is required: pass --data-dir DIR, the directory the broker keeps its data in"))
	}
	if *partitions < 1 || *partitions > 1<<20 {
		problems = append(problems, fmt.Errorf("--partitions is %d: pass a partition count from 1 to %d", *partitions, 1<<20))
	}
	logger, err := brokerLogger(*logLevel, *logFormat, stderr)
	if err != nil {
		problems = append(problems, err)
	}
	if *acls && *usersFile == "" {
		problems = append(problems, errors.New("--acls needs --sasl-users-file: ACLs name SASL users"))
	}
	if *superUsers != "" && !*acls {
		problems = append(problems, errors.New("--super-users needs --acls: without ACLs every user may do everything"))
	}
	if *registryAddr != "" {
		if _, _, err := net.SplitHostPort(*registryAddr); err != nil {
			problems = append(problems, fmt.Errorf("--schema-registry %q: want host:port, e.g. 127.0.0.1:8081", *registryAddr))
		}
	}
	tlsCfg, err := brokerTLS(*tlsCert, *tlsKey, *tlsClientCA)
	if err != nil {
		problems = append(problems, err)
	}
	var users []kafka.User
	if *usersFile != "" {
		if users, err = readUsers(*usersFile); err != nil {
			problems = append(problems, err)
		}
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}

	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fmt.Errorf("create --data-dir: %w", err)
	}
	b, err := kafka.StartBroker(kafka.BrokerConfig{
		Addr:              *addr,
		DataDir:           *dataDir,
		SyncWrites:        *syncWrites,
		DefaultPartitions: int32(*partitions),
		Logger:            logger,
		TLS:               tlsCfg,
		Users:             users,
		ACLs:              *acls,
		SuperUsers:        split(*superUsers),
		Advertise:         *advertise,
	})
	if err != nil {
		return err
	}
	if *faultAPI != "" {
		if err := serveFaultAPI(ctx, *faultAPI, b, stderr); err != nil {
			b.Close()
			return err
		}
	}
	var registry *schemaregistry.Server
	if *registryAddr != "" {
		// Started before the broker's listening line, which stays the
		// one line scripts wait for: when it is printed, both serve.
		if registry, _, err = startRegistry(*registryAddr, *dataDir, tlsCfg, users, stdout, stderr); err != nil {
			b.Close()
			return err
		}
	}
	var security []string
	if tlsCfg != nil {
		security = append(security, "TLS")
		if tlsCfg.ClientAuth == tls.RequireAndVerifyClientCert {
			security = append(security, "client certificates required")
		}
	}
	if len(users) > 0 {
		security = append(security, fmt.Sprintf("SASL (%d users)", len(users)))
	}
	if *acls {
		security = append(security, "ACLs")
	}
	if len(security) == 0 {
		security = append(security, "plaintext, no authentication")
	}
	fmt.Fprintf(stdout, "eddy broker: listening on %s, data dir %s, %s\n", b.Addr(), *dataDir, strings.Join(security, ", "))

	// A signal is the normal way to stop, not an error.
	<-ctx.Done()
	if registry != nil {
		registry.Close()
	}
	b.Close()
	fmt.Fprintln(stdout, "eddy broker: stopped")
	return nil
}

// startRegistry serves the schema registry on addr, kept in the broker's
// data dir, with the broker's TLS and its SASL users as basic-auth users,
// and prints its lifecycle line.
func startRegistry(addr, dataDir string, tlsCfg *tls.Config, users []kafka.User, stdout, stderr io.Writer) (*schemaregistry.Server, string, error) {
	dir := filepath.Join(dataDir, "schema-registry")
	var opts []schemaregistry.Option
	if len(users) > 0 {
		m := make(map[string]string, len(users))
		for _, u := range users {
			m[u.Name] = u.Password
		}
		opts = append(opts, schemaregistry.WithBasicAuth(m))
	}
	reg, err := schemaregistry.NewServer(dir, opts...)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		reg.Close()
		return nil, "", fmt.Errorf("--schema-registry: %w", err)
	}
	scheme, security := "http", "no authentication"
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg.Clone())
		scheme = "https"
	}
	if len(users) > 0 {
		security = fmt.Sprintf("basic auth (%d users)", len(users))
	}
	go func() {
		if err := reg.Serve(ln); err != nil {
			fmt.Fprintf(stderr, "eddy broker: schema registry: %v\n", err)
		}
	}()
	url := fmt.Sprintf("%s://%s", scheme, ln.Addr())
	fmt.Fprintf(stdout, "eddy broker: schema registry on %s, data dir %s, %s\n", url, dir, security)
	return reg, url, nil
}

// brokerLogger maps --log-level (slog's levels, or none: discard) and
// --log-format (text or json) to a logger on w, reporting both flags'
// problems at once. The broker is not an eddy app: its logger is its own.
func brokerLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var errs []error
	var lvl slog.Level
	discard := strings.EqualFold(level, "none")
	if err := lvl.UnmarshalText([]byte(level)); err != nil && !discard {
		errs = append(errs, fmt.Errorf("--log-level %q: use debug, info, warn or error (--log-level also takes none)", level))
	}
	json := strings.EqualFold(format, "json")
	if !json && !strings.EqualFold(format, "text") {
		errs = append(errs, fmt.Errorf("--log-format %q: use text or json", format))
	}
	switch err := errors.Join(errs...); {
	case err != nil:
		return nil, err
	case discard:
		return nil, nil
	case json:
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}
