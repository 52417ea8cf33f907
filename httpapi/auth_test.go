package httpapi

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
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

// TestTokenRedirectStaysHere checks that the redirect after ?token= goes
// to a path of this server only, whatever the request's target: a
// Location that a browser reads as another host ("//evil.example/",
// "/\evil.example", an absolute URL) would send the user there, cookie
// freshly set, from a link that carries a valid token.
func TestTokenRedirectStaysHere(t *testing.T) {
	h := New(Options{Metrics: http.NotFoundHandler(), Token: "s3cret"})
	for _, tc := range []struct{ target, want string }{
		{"/metrics?token=s3cret", "/metrics"},
		{"/v1/stores/s/keys?prefix=a&token=s3cret&limit=5", "/v1/stores/s/keys?limit=5&prefix=a"},
		{"//evil.example/?token=s3cret", "/"},
		{"//evil.example/x?a=1&token=s3cret", "/?a=1"},
		{`/\evil.example?token=s3cret`, "/"},
		{"/%5Cevil.example?token=s3cret", "/"},
		{"http://evil.example/?token=s3cret", "/"},
		{"http://evil.example/metrics?token=s3cret", "/metrics"},
		{"/%2F%2Fevil.example?token=s3cret", "/"},
		{"/%2f/evil.example?token=s3cret", "/"},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.target, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		loc := w.Header().Get("Location")
		if w.Code != http.StatusSeeOther || loc != tc.want {
			t.Errorf("%s: %d Location %q, want 303 to %q", tc.target, w.Code, loc, tc.want)
		}
		// Whatever the exact answer, it must resolve to this origin.
		base, _ := url.Parse("https://eddy.internal/metrics")
		if u, err := url.Parse(loc); err != nil || base.ResolveReference(u).Host != "eddy.internal" ||
			strings.HasPrefix(loc, "//") || strings.Contains(loc, `\`) || strings.Contains(loc, "token") {
			t.Errorf("%s: Location %q leaves the origin or keeps the token", tc.target, loc)
		}
		if !strings.Contains(w.Header().Get("Set-Cookie"), tokenCookie+"=s3cret") {
			t.Errorf("%s: no cookie set", tc.target)
		}
	}
}
