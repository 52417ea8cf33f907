// Package testutil holds small helpers that several packages' tests share.
package testutil

import (
	"strings"
	"sync"
)

// LogBuffer is a log sink that an app's goroutines write to while a test
// reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
