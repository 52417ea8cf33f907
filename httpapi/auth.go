package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"time"
)

// TokenEnv is the environment variable the examples and `eddy query` read
// the bearer token from (never a flag, so it does not show in process
// listings).
const TokenEnv = "EDDY_HTTP_TOKEN"

// tokenCookie carries the token for a browser: the web UI's page and its
// fetches cannot set an Authorization header by themselves.
const tokenCookie = "eddy_token"

// requireToken wraps h so that every request but the health checks must
// carry token: "Authorization: Bearer TOKEN", or the cookie a browser gets
// by opening any page once with "?token=TOKEN" (it is then redirected to
// the same page without it, so the token leaves the address bar).
// /healthz and /readyz stay open: orchestrators probe them without
// credentials, and they reveal nothing but up or down.
func requireToken(token string, h http.Handler) http.Handler {
	want := []byte(token)
	ok := func(got string) bool { return subtle.ConstantTimeCompare([]byte(got), want) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			h.ServeHTTP(w, r)
			return
		}
		if got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(got) {
			h.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(tokenCookie); err == nil && ok(c.Value) {
			h.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); q.Has("token") && ok(q.Get("token")) {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, Expires: time.Now().Add(24 * time.Hour)})
			q.Del("token")
			w.Header().Set("Location", sameOrigin(r.URL.EscapedPath(), r.URL.Path, q.Encode()))
			w.WriteHeader(http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="eddy"`)
		writeError(w, http.StatusUnauthorized, "this endpoint needs the app's token: send \"Authorization: Bearer TOKEN\" (eddy query reads it from "+TokenEnv+"), or open the page once with ?token=TOKEN")
	})
}

// sameOrigin is the Location of the redirect after ?token=: the request's
// path (escaped, as it came) and query, or "/" with the query when the
// path, as sent or decoded, is not a plain absolute path. A browser reads
// "//host/…" and "/\host/…" as another host; a link that carries a valid
// token must not send the user there with the cookie just set. Only the
// path is used, so an absolute request target (GET http://host/…)
// redirects here too.
func sameOrigin(escapedPath, path, query string) string {
	loc := escapedPath
	for _, p := range []string{escapedPath, path} {
		if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, `/\`) {
			loc = "/"
		}
	}
	if query != "" {
		loc += "?" + query
	}
	return loc
}
