package httpapi

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("eddy_x 1\n")) })
	srv := httptest.NewServer(New(Options{Metrics: metrics, Token: "s3cret"}))
	defer srv.Close()
	get := func(c *http.Client, path string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if len(header) == 2 {
			req.Header.Set(header[0], header[1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	c := srv.Client()
	if code, _ := get(c, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz without a token: %d, want 200 (probes carry none)", code)
	}
	if code, body := get(c, "/metrics"); code != http.StatusUnauthorized || !strings.Contains(body, TokenEnv) {
		t.Errorf("/metrics without a token: %d %q, want 401 naming %s", code, body, TokenEnv)
	}
	if code, _ := get(c, "/metrics", "Authorization", "Bearer wrong"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", code)
	}
	if code, body := get(c, "/metrics", "Authorization", "Bearer s3cret"); code != http.StatusOK || body != "eddy_x 1\n" {
		t.Errorf("/metrics with the token: %d %q", code, body)
	}
	// A browser: ?token= sets a cookie and redirects to the page without it.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if code, body := get(browser, "/metrics?token=s3cret"); code != http.StatusOK || body != "eddy_x 1\n" {
		t.Errorf("/metrics?token=: %d %q, want the page after the redirect", code, body)
	}
	if code, _ := get(browser, "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics with the cookie: %d, want 200", code)
	}
	if code, _ := get(&http.Client{}, "/metrics?token=wrong"); code != http.StatusUnauthorized {
		t.Errorf("/metrics?token=wrong: %d, want 401", code)
	}
}
