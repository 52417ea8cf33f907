package pipeline

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/httpapi"
)

// HTTPFlags are the flags of an app's HTTP endpoints (metrics, health,
// queries, UI), shared with examples/windowed.
type HTTPFlags struct {
	addr, cert, key, ca string
}

// AddHTTPFlags registers --http, --http-tls-cert, --http-tls-key and
// --http-tls-ca on fs; example is an address for the help text.
func AddHTTPFlags(fs *flag.FlagSet, example string) *HTTPFlags {
	f := &HTTPFlags{}
	fs.StringVar(&f.addr, "http", "", "serve metrics, health, state queries and the web UI on this address, e.g. "+example+
		"; a port alone (:8080) binds to 127.0.0.1, give 0.0.0.0:8080 to serve every interface (default: no HTTP). "+
		"With "+httpapi.TokenEnv+" set, every endpoint but /healthz and /readyz requires that bearer token")
	fs.StringVar(&f.cert, "http-tls-cert", "", "PEM file of the HTTP server's certificate: serve HTTPS (with --http-tls-key)")
	fs.StringVar(&f.key, "http-tls-key", "", "PEM file of the key of --http-tls-cert")
	fs.StringVar(&f.ca, "http-tls-ca", "", "PEM file of the CA of the other instances' HTTP certificates, for forwarded queries (default: the system's)")
	return f
}

// HTTP is what the flags opened: the listener to serve on (nil: no HTTP)
// and what the app's Config takes of them.
type HTTP struct {
	Listener net.Listener
	Endpoint string
	Token    string
	PeerTLS  *tls.Config
}

// Close closes the listener if it was not served.
func (h HTTP) Close() {
	if h.Listener != nil {
		h.Listener.Close()
	}
}

// Open checks the flags and opens the listener, so that a bad or busy
// address is reported before anything else starts.
func (f *HTTPFlags) Open() (HTTP, error) {
	var h HTTP
	if f.addr == "" {
		if f.cert != "" || f.key != "" || f.ca != "" {
			return h, errors.New("--http-tls-cert, --http-tls-key and --http-tls-ca need --http: the address to serve on")
		}
		return h, nil
	}
	addr := f.addr
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		addr = net.JoinHostPort("127.0.0.1", port) // localhost unless asked otherwise
	}
	var err error
	if h.Endpoint, err = endpoint(addr); err != nil {
		return h, err
	}
	var serverTLS *tls.Config
	switch {
	case (f.cert == "") != (f.key == ""):
		return h, errors.New("--http-tls-cert and --http-tls-key: pass both (the certificate and its key) or neither")
	case f.cert != "":
		cert, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return h, fmt.Errorf("--http-tls-cert/--http-tls-key: %w", err)
		}
		serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		h.PeerTLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if f.ca != "" {
			pem, err := os.ReadFile(f.ca)
			if err != nil {
				return h, fmt.Errorf("--http-tls-ca: %w", err)
			}
			h.PeerTLS.RootCAs = x509.NewCertPool()
			if !h.PeerTLS.RootCAs.AppendCertsFromPEM(pem) {
				return h, fmt.Errorf("--http-tls-ca %s: no PEM certificate in it", f.ca)
			}
		}
	case f.ca != "":
		return h, errors.New("--http-tls-ca needs --http-tls-cert: the instances forward queries over HTTPS only when they serve it")
	}
	h.Token = os.Getenv(httpapi.TokenEnv)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return h, fmt.Errorf("--http %s: %w; give a free host:port, e.g. 127.0.0.1:8080", f.addr, err)
	}
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS)
	}
	h.Listener = ln
	return h, nil
}

// RunApp runs app until ctx is cancelled, serving its HTTP endpoints on ln
// while it runs (none for a nil ln). examples/windowed uses it too.
func RunApp(ctx context.Context, app *eddy.App, ln net.Listener) error {
	if ln == nil {
		return app.Run(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(ctx, ln, app.Handler()) }()
	err := app.Run(ctx)
	cancel()
	if serr := <-served; err == nil && serr != nil {
		err = fmt.Errorf("--http %s: %w", ln.Addr(), serr)
	}
	return err
}

// endpoint is the query endpoint an app serving HTTP on httpAddr
// advertises to its group (eddy.Config.Endpoint): httpAddr itself, with
// the machine's host name for an address that names no host
// ("0.0.0.0:8080"). Port 0 is refused: the other instances could not
// reach a port chosen at random.
func endpoint(httpAddr string) (string, error) {
	if httpAddr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return "", fmt.Errorf("--http %s: %w; give host:port, e.g. 127.0.0.1:8080", httpAddr, err)
	}
	if port == "0" {
		return "", fmt.Errorf("--http %s: give an explicit port: it is advertised to the other instances, which forward state queries there", httpAddr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("--http %s: no host to advertise for queries: %w; give the address other instances reach this one at", httpAddr, err)
		}
	}
	return net.JoinHostPort(host, port), nil
}
