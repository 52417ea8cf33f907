package pipeline

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns a logger writing to w at level ("debug", "info", "warn",
// "error") in format ("text": slog's key=value lines; "json": one JSON
// object per line, for log collectors), from the examples' --log-level
// and --log-format flags. Errors name the flag and the values it takes.
// It is the example's, not eddy's: an application picks its own logging
// and hands eddy a *slog.Logger (eddy.Config.Logger).
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var errs []error
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: use debug, info, warn or error", level))
	}
	format = strings.ToLower(format)
	if format != "text" && format != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: use text or json", format))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
