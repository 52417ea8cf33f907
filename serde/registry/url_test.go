package registry_test

import (
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/serde/registry"
)

func TestConfigFromURL(t *testing.T) {
	cfg, err := registry.ConfigFromURL("https://app:s%3Acret@registry.example:8081/sr")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.URLs) != 1 || cfg.URLs[0] != "https://registry.example:8081/sr" || cfg.Username != "app" || cfg.Password != "s:cret" {
		t.Fatalf("ConfigFromURL = %+v, want the URL without its credentials, sent as basic auth", cfg)
	}
	if cfg, err := registry.ConfigFromURL("http://127.0.0.1:8081"); err != nil || cfg.Username != "" || cfg.URLs[0] != "http://127.0.0.1:8081" {
		t.Fatalf("ConfigFromURL without credentials = %+v %v", cfg, err)
	}
	for _, raw := range []string{"127.0.0.1:8081", "ftp://host", "http://", ":bad"} {
		if _, err := registry.ConfigFromURL(raw); err == nil || !strings.Contains(err.Error(), "want an http:// or https:// URL") {
			t.Errorf("ConfigFromURL(%q) = %v, want a refusal", raw, err)
		}
	}
}
