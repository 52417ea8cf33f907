package pgsink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eddy-streams/eddy/serde/registry"
)

// Bounds on what an Avro record may claim, so that a corrupt or hostile
// one is a bad record rather than the sink's memory or stack exhausted:
// the bytes of a string or bytes value and the items of an array or map
// (Kafka's default largest record, as serde/avro), and the nesting of
// records, arrays and maps.
const (
	avroMaxBytes = 1_000_000
	avroMaxItems = 1_000_000
	avroMaxDepth = 64
)

// AvroMapper maps records whose values are Avro records in the Confluent
// wire format (magic byte 0, schema id, payload), of any schema: each
// value is decoded with its writer schema, fetched from reg by the
// record's schema id the first time the id is met (with the schemas it
// references), and each top-level field of the record fills the column
// of the same name:
//
//   - null (a union's null branch too) as NULL, a union's other branch as
//     its value;
//   - strings, enums (their symbol), booleans and numbers as their text,
//     bytes and fixed as bytea, decimals as their exact digits;
//   - timestamp-millis and -micros as instants (RFC 3339, UTC: timestamptz
//     columns), local-timestamp-* as a timestamp without zone, date as
//     YYYY-MM-DD, time-millis and -micros as HH:MM:SS.fff;
//   - nested records, arrays and maps as their JSON text (for json/jsonb
//     columns), with unions as their branch's value, bytes as base64.
//
// The record key fills keyColumn and a tombstone deletes, as with
// JSONMapper. A value that is not framed, names a schema id the registry
// does not know or a schema that is not an Avro record, or does not
// decode with its schema is the record's fault (dead-lettered); a
// registry that stays unreachable is not: the error wraps
// serde.ErrUnavailable and the sink stops.
func AvroMapper(keyColumn string, reg *registry.Client) Mapper {
	schemas := newWriterSchemas(reg, "avro", sr.TypeAvro, parseAvro)
	api := avro.Config{MaxByteSliceSize: avroMaxBytes, MaxSliceAllocSize: avroMaxBytes}.Freeze()
	return fieldsMapper(keyColumn, func(value []byte) (map[string]any, error) {
		rec, id, payload, err := schemas.of(value)
		if err != nil {
			return nil, err
		}
		r := avro.NewReader(nil, 0, avro.WithReaderConfig(api))
		r.Reset(payload)
		vals := make(map[string]any, len(rec.Fields()))
		for _, f := range rec.Fields() {
			v := readAvro(r, f.Type(), 0)
			if r.Error != nil {
				return nil, fmt.Errorf("avro: payload (%d bytes) does not match writer schema id %d: field %q: %w", len(payload), id, f.Name(), r.Error)
			}
			if vals[f.Name()], err = columnValue(v); err != nil {
				return nil, fmt.Errorf("avro: field %q: %w", f.Name(), err)
			}
		}
		if r.Peek(); r.Error == nil {
			return nil, fmt.Errorf("avro: payload (%d bytes) longer than writer schema id %d reads: it does not match its schema", len(payload), id)
		}
		return vals, nil
	})
}

// parseAvro parses a writer schema after the schemas it references (whose
// named types it may use), and returns it if it is a record.
func parseAvro(s sr.Schema, refs []registry.Reference) (*avro.RecordSchema, error) {
	// A cache of its own: hamba's default one is shared by the process,
	// and two versions of a record share its name.
	cache := &avro.SchemaCache{}
	for _, r := range refs {
		if _, err := avro.ParseWithCache(r.Schema.Schema, "", cache); err != nil {
			return nil, fmt.Errorf("reference %q does not parse: %w", r.Name, err)
		}
	}
	schema, err := avro.ParseWithCache(s.Schema, "", cache)
	if err != nil {
		return nil, fmt.Errorf("does not parse: %w", err)
	}
	return avroRecord(schema)
}

func avroRecord(schema avro.Schema) (*avro.RecordSchema, error) {
	rec, ok := schema.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("is an Avro %s, not a record: it has no fields to fill columns", schema.Type())
	}
	return rec, nil
}

// AvroFields returns the names of the top-level fields of an Avro record
// schema (its JSON text), for Config.ValueFields: the fields every value
// written with it holds.
func AvroFields(schema string) ([]string, error) {
	s, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("eddy: pgsink: Avro schema does not parse: %w", err)
	}
	rec, err := avroRecord(s)
	if err != nil {
		return nil, fmt.Errorf("eddy: pgsink: the Avro schema %w", err)
	}
	names := make([]string, len(rec.Fields()))
	for i, f := range rec.Fields() {
		names[i] = f.Name()
	}
	return names, nil
}

// columnValue is a decoded value as its column receives it: nested
// values (maps and slices) as their JSON text.
func columnValue(v any) (any, error) {
	switch v.(type) {
	case map[string]any, []any:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // the text as written, as JSONMapper keeps it
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		return jsonText(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
	}
	return v, nil
}

// readAvro reads a value of schema s from r: records and maps as
// map[string]any, arrays as []any, a union as its branch's value, and the
// logical types as their column's text (see AvroMapper). An error is left
// in r.Error.
func readAvro(r *avro.Reader, s avro.Schema, depth int) any {
	if depth > avroMaxDepth {
		r.ReportError("decode", fmt.Sprintf("values nest deeper than %d", avroMaxDepth))
		return nil
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return readAvro(r, s.Schema(), depth)
	case *avro.NullSchema:
		return nil
	case *avro.RecordSchema:
		obj := make(map[string]any, len(s.Fields()))
		for _, f := range s.Fields() {
			obj[f.Name()] = readAvro(r, f.Type(), depth+1)
		}
		return obj
	case *avro.UnionSchema:
		types := s.Types()
		i := r.ReadLong()
		if i < 0 || i >= int64(len(types)) {
			r.ReportError("decode", fmt.Sprintf("union branch %d of a union of %d", i, len(types)))
			return nil
		}
		return readAvro(r, types[i], depth)
	case *avro.ArraySchema:
		arr := []any{}
		readBlocks(r, func() {
			arr = append(arr, readAvro(r, s.Items(), depth+1))
		})
		return arr
	case *avro.MapSchema:
		obj := map[string]any{}
		readBlocks(r, func() {
			k := r.ReadString()
			obj[k] = readAvro(r, s.Values(), depth+1)
		})
		return obj
	case *avro.EnumSchema:
		i := r.ReadInt()
		if i < 0 || int(i) >= len(s.Symbols()) {
			r.ReportError("decode", fmt.Sprintf("enum symbol %d of %d", i, len(s.Symbols())))
			return nil
		}
		return s.Symbols()[i]
	case *avro.FixedSchema:
		b := make([]byte, s.Size())
		r.Read(b)
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimalText(b, d.Scale())
		}
		return b
	case *avro.PrimitiveSchema:
		return readPrimitive(r, s)
	}
	r.ReportError("decode", fmt.Sprintf("unexpected schema type %s", s.Type()))
	return nil
}

// readBlocks reads the blocks of an array or map, calling item for each
// item, at most avroMaxItems of them.
func readBlocks(r *avro.Reader, item func()) {
	n := int64(0)
	for r.Error == nil {
		l, _ := r.ReadBlockHeader()
		if l == 0 || r.Error != nil {
			return
		}
		if n += l; n > avroMaxItems {
			r.ReportError("decode", fmt.Sprintf("more than %d items claimed", avroMaxItems))
			return
		}
		for range l {
			item()
			if r.Error != nil {
				return
			}
		}
	}
}

// Layouts of the logical types read as text.
const (
	dateLayout           = "2006-01-02"
	timeMillisLayout     = "15:04:05.000"
	timeMicrosLayout     = "15:04:05.000000"
	localTimestampLayout = "2006-01-02T15:04:05.999999"
)

func readPrimitive(r *avro.Reader, s *avro.PrimitiveSchema) any {
	var logical avro.LogicalType
	if l := s.Logical(); l != nil {
		logical = l.Type()
	}
	switch s.Type() {
	case avro.Boolean:
		return r.ReadBool()
	case avro.Int:
		i := r.ReadInt()
		switch logical {
		case avro.Date:
			return time.Unix(int64(i)*86400, 0).UTC().Format(dateLayout)
		case avro.TimeMillis:
			return time.UnixMilli(int64(i)).UTC().Format(timeMillisLayout)
		}
		return i
	case avro.Long:
		i := r.ReadLong()
		switch logical {
		case avro.TimeMicros:
			return time.UnixMicro(i).UTC().Format(timeMicrosLayout)
		case avro.TimestampMillis:
			return time.UnixMilli(i).UTC()
		case avro.TimestampMicros:
			return time.UnixMicro(i).UTC()
		case avro.LocalTimestampMillis:
			return time.UnixMilli(i).UTC().Format(localTimestampLayout)
		case avro.LocalTimestampMicros:
			return time.UnixMicro(i).UTC().Format(localTimestampLayout)
		}
		return i
	case avro.Float:
		return r.ReadFloat()
	case avro.Double:
		return r.ReadDouble()
	case avro.String:
		return r.ReadString()
	case avro.Bytes:
		b := r.ReadBytes()
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimalText(b, d.Scale())
		}
		return b
	}
	r.ReportError("decode", fmt.Sprintf("unexpected primitive type %s", s.Type()))
	return nil
}

// decimalText is an Avro decimal (a big-endian two's-complement unscaled
// integer) as its exact digits, a JSON number in nested JSON.
func decimalText(b []byte, scale int) json.Number {
	i := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		i.Sub(i, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return json.Number(new(big.Rat).SetFrac(i, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)).FloatString(scale))
}
