package verify

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Transcoder turns records in the Confluent wire format (Avro or
// Protobuf, through a schema registry) into the JSON the verifiers read,
// so that the ledger and windowed checks hold for every --format. It
// decodes independently of the examples' serdes and of eddy's serde
// packages: it reads the header itself, fetches the writer schema by id
// with a plain registry client, and decodes generically (an Avro map, a
// dynamic Protobuf message), so a bug in eddy's serdes shows as a wrong or
// missing record rather than being shared by the check.
type Transcoder struct {
	reg      *sr.Client
	decoders map[int]func(payload []byte) (map[string]any, error)
}

// NewTranscoder returns a transcoder that reads schemas from the registry
// at url.
func NewTranscoder(url string) (*Transcoder, error) {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return nil, fmt.Errorf("verify: registry client: %w", err)
	}
	return &Transcoder{reg: cl, decoders: map[int]func([]byte) (map[string]any, error){}}, nil
}

// Records returns copies of recs whose values are the JSON of their
// decoded values; a value that does not decode (not framed, an unknown
// id, not its schema's) becomes nil, which no verifier takes for a
// payment or an output.
func (t *Transcoder) Records(ctx context.Context, recs []*kgo.Record) ([]*kgo.Record, error) {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		c := *r
		v, err := t.JSON(ctx, r.Value)
		if errors.Is(err, errUnreachable) {
			return nil, err
		}
		c.Value = v
		out[i] = &c
	}
	return out, nil
}

var errUnreachable = errors.New("schema registry unreachable")

// JSON decodes one framed value into JSON.
func (t *Transcoder) JSON(ctx context.Context, b []byte) ([]byte, error) {
	if len(b) < 5 || b[0] != 0 {
		return nil, errors.New("not the Confluent wire format")
	}
	id := int(binary.BigEndian.Uint32(b[1:5]))
	dec, ok := t.decoders[id]
	if !ok {
		s, err := t.reg.SchemaByID(ctx, id)
		var re *sr.ResponseError
		switch {
		case errors.As(err, &re) && re.StatusCode == 404:
			return nil, fmt.Errorf("schema id %d: %w", id, err)
		case err != nil:
			return nil, fmt.Errorf("%w: schema id %d: %w", errUnreachable, id, err)
		}
		if dec, err = newDecoder(s); err != nil {
			return nil, fmt.Errorf("schema id %d: %w", id, err)
		}
		t.decoders[id] = dec
	}
	m, err := dec(b[5:])
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func newDecoder(s sr.Schema) (func([]byte) (map[string]any, error), error) {
	switch s.Type {
	case sr.TypeAvro:
		schema, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
		if err != nil {
			return nil, err
		}
		return func(p []byte) (map[string]any, error) {
			var m map[string]any
			err := avro.Unmarshal(schema, p, &m)
			return m, err
		}, nil
	case sr.TypeProtobuf:
		c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": s.Schema}),
		})}
		files, err := c.Compile(context.Background(), "schema.proto")
		if err != nil {
			return nil, err
		}
		return func(p []byte) (map[string]any, error) { return decodeProtobuf(files[0], p) }, nil
	}
	return nil, fmt.Errorf("schema type %v: the verifier reads Avro and Protobuf", s.Type)
}

// decodeProtobuf reads Confluent's message indexes (a zigzag varint count,
// then as many zigzag varint indexes; the count 0 alone stands for [0])
// and decodes the message they name as a flat map of its set fields.
func decodeProtobuf(file protoreflect.FileDescriptor, p []byte) (map[string]any, error) {
	next := func() (int, error) {
		v, n := protowire.ConsumeVarint(p)
		if n < 0 {
			return 0, errors.New("bad message indexes")
		}
		p = p[n:]
		return int(protowire.DecodeZigZag(v)), nil
	}
	count, err := next()
	if err != nil {
		return nil, err
	}
	indexes := []int{0}
	if count > 0 {
		indexes = indexes[:0]
		for range count {
			i, err := next()
			if err != nil {
				return nil, err
			}
			indexes = append(indexes, i)
		}
	}
	msgs := file.Messages()
	var desc protoreflect.MessageDescriptor
	for _, i := range indexes {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %d out of range", i)
		}
		desc = msgs.Get(i)
		msgs = desc.Messages()
	}
	msg := dynamicpb.NewMessage(desc)
	if err := proto.Unmarshal(p, msg); err != nil {
		return nil, err
	}
	m := map[string]any{}
	fields := desc.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		// Proto3 scalars: an unset field is its zero value, as the
		// examples' JSON writes it.
		m[string(f.Name())] = msg.Get(f).Interface()
	}
	return m, nil
}
