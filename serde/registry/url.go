package registry

import (
	"errors"
	"net/url"
)

// ConfigFromURL returns the Config of the registry at raw, as eddy's
// commands take it (--schema-registry): an http:// or https:// URL whose
// user:password@, if any, is sent as HTTP basic auth rather than as part
// of the URL. The caller sets the other fields (Logger, Timeout).
func ConfigFromURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Config{}, errors.New("want an http:// or https:// URL, e.g. http://127.0.0.1:8081")
	}
	var cfg Config
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		u.User = nil
	}
	cfg.URLs = []string{u.String()}
	return cfg, nil
}
