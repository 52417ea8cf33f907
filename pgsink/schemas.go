package pgsink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy/serde/registry"
)

// writerSchemas is what a registry mapper (AvroMapper, ProtobufMapper)
// made of each writer schema its records named by id: the schema parsed
// with its references, or why it cannot be read. The registry client
// caches the schemas' text; this keeps their parsing out of the
// per-record path.
type writerSchemas[W any] struct {
	reg    *registry.Client
	format string        // "avro", "protobuf": for errors
	typ    sr.SchemaType // the type the records' schemas must be
	parse  func(s sr.Schema, refs []registry.Reference) (W, error)

	mu  sync.RWMutex
	ids map[int]parsedSchema[W]
}

// parsedSchema is a writer schema parsed, or why it cannot be (err: the
// fault of every record that names it).
type parsedSchema[W any] struct {
	w   W
	err error
}

func newWriterSchemas[W any](reg *registry.Client, format string, typ sr.SchemaType, parse func(sr.Schema, []registry.Reference) (W, error)) *writerSchemas[W] {
	return &writerSchemas[W]{reg: reg, format: format, typ: typ, parse: parse, ids: map[int]parsedSchema[W]{}}
}

// of returns the parsed writer schema of a framed value, its id, and
// the value after the header.
func (c *writerSchemas[W]) of(value []byte) (w W, id int, rest []byte, err error) {
	id, rest, err = registry.SplitHeader(value)
	if err != nil {
		return w, 0, nil, fmt.Errorf("%s: %w", c.format, err)
	}
	w, err = c.get(id)
	return w, id, rest, err
}

// get returns writer schema id parsed. The registry's errors are not
// kept: an unknown id is the record's fault (the client remembers it for
// a moment), an unavailable registry wraps serde.ErrUnavailable (no
// record's fault: the sink stops), and either may be over by the next
// record.
func (c *writerSchemas[W]) get(id int) (W, error) {
	c.mu.RLock()
	p, ok := c.ids[id]
	c.mu.RUnlock()
	if !ok {
		s, err := c.reg.SchemaByID(context.Background(), id)
		if errors.Is(err, registry.ErrUnknownID) {
			return p.w, fmt.Errorf("%s: writer schema id %d unknown to the registry: %w", c.format, id, err)
		}
		if err != nil {
			return p.w, fmt.Errorf("%s: %w", c.format, err)
		}
		p, err = c.parseWithRefs(id, s)
		if err != nil {
			return p.w, err
		}
		c.mu.Lock()
		c.ids[id] = p
		c.mu.Unlock()
	}
	return p.w, p.err
}

// parseWithRefs fetches the schemas s references and parses s with them.
// An error it returns is the registry's (kept by no one); a schema that
// does not parse is a parsedSchema's err.
func (c *writerSchemas[W]) parseWithRefs(id int, s sr.Schema) (parsedSchema[W], error) {
	if s.Type != c.typ {
		return parsedSchema[W]{err: fmt.Errorf("%s: writer schema id %d is %s, not %s", c.format, id, s.Type, c.typ)}, nil
	}
	refs, err := c.reg.References(context.Background(), s)
	if errors.Is(err, registry.ErrNotRegistered) {
		return parsedSchema[W]{err: fmt.Errorf("%s: writer schema id %d: a reference: %w", c.format, id, err)}, nil
	}
	if err != nil {
		return parsedSchema[W]{}, fmt.Errorf("%s: writer schema id %d: its references: %w", c.format, id, err)
	}
	for _, r := range refs {
		if r.Schema.Type != c.typ {
			return parsedSchema[W]{err: fmt.Errorf("%s: writer schema id %d: reference %q is %s, not %s", c.format, id, r.Name, r.Schema.Type, c.typ)}, nil
		}
	}
	w, err := c.parse(s, refs)
	if err != nil {
		return parsedSchema[W]{err: fmt.Errorf("%s: writer schema id %d: %w", c.format, id, err)}, nil
	}
	return parsedSchema[W]{w: w}, nil
}
