package pipeline

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.With("app", "ledger").Info("task assigned", "task", "0_3")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("json format wrote %q: %v", buf.String(), err)
	}
	if line["msg"] != "task assigned" || line["app"] != "ledger" || line["task"] != "0_3" || line["level"] != "INFO" {
		t.Fatalf("json line %v", line)
	}

	buf.Reset()
	if log, err = NewLogger(&buf, "DEBUG", "text"); err != nil {
		t.Fatal(err)
	}
	log.Debug("shown", "task", "0_1")
	if !strings.Contains(buf.String(), "level=DEBUG msg=shown task=0_1") {
		t.Fatalf("text format wrote %q", buf.String())
	}

	for _, c := range []struct{ level, format, want string }{
		{"loud", "text", "--log-level"},
		{"info", "xml", "--log-format"},
	} {
		if _, err := NewLogger(&buf, c.level, c.format); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%q, %q): %v, want an error naming %s", c.level, c.format, err, c.want)
		}
	}
}
