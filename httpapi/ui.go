package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
)

// uiFiles is the web UI: plain HTML, CSS and JavaScript with no build step
// and nothing fetched from elsewhere, so that it works air-gapped. It reads
// the app's own endpoints (/v1/status, /v1/topology, /metrics and the
// store queries) and shows what it finds; a part whose endpoint is not
// served says so.
//
//go:embed ui
var uiFiles embed.FS

// uiHandler serves index.html at / and the assets under /ui/.
func uiHandler() (index, assets http.Handler) {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the directory is embedded above: it exists
	}
	files := http.FileServerFS(sub)
	index = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, sub, "index.html")
	})
	assets = http.StripPrefix("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Revalidated each load: an upgraded binary serves new assets.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	return index, assets
}
