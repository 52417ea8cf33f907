package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/httpapi"
)

func runQuery(ctx context.Context, args []string) error {
	return queryMain(ctx, args, os.Stdout, os.Stderr)
}

// queryMain is `eddy query`: a client of an app's HTTP query API
// (package httpapi). It prints the answer's JSON, indented; a 503 (a task
// moving) is retried as its Retry-After says, until --timeout.
func queryMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "", "HOST:PORT of any instance of the app (its --http address); required")
	store := fs.String("store", "", "store to query; without it, list the app's stores")
	key := fs.String("key", "", "the key to look up (with --window-from/--window-to: its windows)")
	prefix := fs.String("prefix", "", "scan the keys that start with this prefix")
	from := fs.String("from", "", "scan the keys from this one (inclusive)")
	to := fs.String("to", "", "scan the keys up to this one (exclusive)")
	limit := fs.Int("limit", 0, "most entries a scan returns (default: the server's, 100)")
	windowFrom := fs.String("window-from", "", "windows of --key that start at or after this time: ms since the epoch or RFC 3339")
	windowTo := fs.String("window-to", "", "windows of --key that start at or before this time: ms since the epoch or RFC 3339")
	tlsCA := fs.String("tls-ca", "", "PEM file of the CA of the app's HTTPS certificate (with an https:// address; default: the system's)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long (a 503 during a rebalance is retried until then)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0))
	}
	if *addr == "" {
		return errors.New("--http is required: the HOST:PORT an instance of the app serves HTTP on, e.g. 127.0.0.1:8080")
	}
	windowed := *windowFrom != "" || *windowTo != ""
	scan := *prefix != "" || *from != "" || *to != ""
	var path string
	q := url.Values{}
	switch {
	case *store == "" && (*key != "" || scan || windowed):
		return errors.New("--store is required with --key, --prefix, --from/--to and --window-from/--window-to")
	case *store == "":
		path = "/v1/stores"
	case *key != "" && scan:
		return errors.New("give --key (a lookup) or --prefix/--from/--to (a scan), not both")
	case *prefix != "" && (*from != "" || *to != ""):
		return errors.New("give --prefix or --from/--to, not both")
	case windowed && *key == "":
		return errors.New("--window-from/--window-to need --key: the key whose windows to fetch")
	case windowed:
		path = "/v1/stores/" + url.PathEscape(*store) + "/keys/" + url.PathEscape(*key) + "/windows"
		setIf(q, "from", *windowFrom)
		setIf(q, "to", *windowTo)
	case *key != "":
		path = "/v1/stores/" + url.PathEscape(*store) + "/keys/" + url.PathEscape(*key)
	default:
		path = "/v1/stores/" + url.PathEscape(*store) + "/keys"
		setIf(q, "prefix", *prefix)
		setIf(q, "from", *from)
		setIf(q, "to", *to)
	}
	if *limit < 0 {
		return fmt.Errorf("--limit %d: give a positive number", *limit)
	}
	if *limit > 0 {
		q.Set("limit", strconv.Itoa(*limit))
	}
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u := strings.TrimSuffix(base, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client := &http.Client{}
	if *tlsCA != "" {
		pem, err := os.ReadFile(*tlsCA)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca %s: no PEM certificate in it", *tlsCA)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	body, err := getRetrying(ctx, client, u, os.Getenv(httpapi.TokenEnv))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, body, "", "  "); err != nil {
		out.Reset()
		out.Write(body)
	}
	if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	_, err = stdout.Write(out.Bytes())
	return err
}

func setIf(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

// getRetrying GETs u (with token as a bearer token, if any), retrying a
// 503 after its Retry-After (1s default).
func getRetrying(ctx context.Context, client *http.Client, u, token string) ([]byte, error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, fmt.Errorf("--http: %w", err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w; is the app running with --http at that address?", u, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", u, err)
		}
		if resp.StatusCode == http.StatusOK {
			return body, nil
		}
		var e struct{ Error string }
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode != http.StatusServiceUnavailable {
			return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, msg)
		}
		wait := time.Second
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("GET %s: %s: %s (retried until --timeout)", u, resp.Status, msg)
		case <-time.After(wait):
		}
	}
}
