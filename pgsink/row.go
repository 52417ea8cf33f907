package pgsink

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/eddy-streams/eddy/serde"
)

// Row is one change to a table: the values of its columns by name (key
// columns included), or, when Delete is set, the key of the row to
// remove (only the key columns are read).
type Row struct {
	Values map[string]any
	Delete bool
}

// A Mapper turns a record's key and value into a Row. A nil value is a
// tombstone: a Mapper should return a Row with Delete set. An error is
// the record's fault: the sink dead-letters the record with it as the
// reason (or stops, as configured). JSONMapper is the default; a Mapper
// over a serde (Avro, Protobuf) decodes the value and returns its fields:
//
//	func(key, value []byte) (pgsink.Row, error) {
//		b, err := balances.Deserialize(value)
//		...
//		return pgsink.Row{Values: map[string]any{"account": b.Account, "balance": b.Balance}}, nil
//	}
type Mapper func(key, value []byte) (Row, error)

// JSONMapper is the default mapping: each field of a JSON object value
// fills the column of the same name (strings as their text, numbers as
// written, true/false, null as NULL, nested objects and arrays as their
// JSON text, for json/jsonb columns) and, when keyColumn is not empty, a
// non-empty record key fills keyColumn (the key's bytes as text; a value
// field of that name must then hold the same text). A tombstone deletes
// the row of keyColumn = the key.
func JSONMapper(keyColumn string) Mapper {
	return fieldsMapper(keyColumn, jsonFields)
}

// fieldsMapper is the mapping of JSONMapper, AvroMapper and
// ProtobufMapper: decode returns a value's fields as the columns receive
// them, and the record key fills keyColumn as JSONMapper says.
func fieldsMapper(keyColumn string, decode func(value []byte) (map[string]any, error)) Mapper {
	return func(key, value []byte) (Row, error) {
		if value == nil {
			return tombstone(keyColumn, key)
		}
		vals, err := decode(value)
		if err != nil {
			return Row{}, err
		}
		if keyColumn != "" && len(key) > 0 {
			if v, ok := vals[keyColumn]; ok {
				t, _ := textOf(v)
				if t == nil || *t != string(key) {
					return Row{}, fmt.Errorf("value's field %q (%s) differs from the record key %q", keyColumn, describeText(t), key)
				}
			}
			vals[keyColumn] = string(key)
		}
		return Row{Values: vals}, nil
	}
}

// tombstone is the Row of a record without a value: the delete of the row
// whose keyColumn is the record key.
func tombstone(keyColumn string, key []byte) (Row, error) {
	if keyColumn == "" || key == nil {
		return Row{}, errors.New("tombstone without a key to delete by")
	}
	return Row{Delete: true, Values: map[string]any{keyColumn: string(key)}}, nil
}

func describeText(t *string) string {
	if t == nil {
		return "null"
	}
	return strconv.Quote(*t)
}

// jsonText is a JSON scalar's or document's text as a column receives it.
type jsonText string

// jsonFields decodes a JSON object into its fields, each as the text its
// column receives (nil for null).
func jsonFields(value []byte) (map[string]any, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(value, &raw); err != nil {
		return nil, fmt.Errorf("value is not a JSON object: %w", err)
	}
	if raw == nil {
		return nil, errors.New("value is not a JSON object: null")
	}
	vals := make(map[string]any, len(raw))
	for k, r := range raw {
		switch r[0] {
		case 'n':
			vals[k] = nil
		case '"':
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return nil, fmt.Errorf("field %q: %w", k, err)
			}
			vals[k] = s
		case '{', '[':
			var b bytes.Buffer
			if err := json.Compact(&b, r); err != nil {
				return nil, fmt.Errorf("field %q: %w", k, err)
			}
			vals[k] = jsonText(b.String())
		default: // a number, true or false: PostgreSQL reads them as written
			vals[k] = jsonText(r)
		}
	}
	return vals, nil
}

// textOf is v as the text PostgreSQL reads for the column (cast from
// text on the server), or nil for NULL.
func textOf(v any) (*string, error) {
	var s string
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		s = x
	case jsonText:
		s = string(x)
	case json.Number:
		s = string(x)
	case []byte:
		// bytea's hex input form.
		s = `\x` + hex.EncodeToString(x)
	case bool:
		s = strconv.FormatBool(x)
	case int:
		s = strconv.Itoa(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case int32:
		s = strconv.FormatInt(int64(x), 10)
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case time.Time:
		s = x.Format(time.RFC3339Nano)
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Pointer:
			if rv.IsNil() {
				return nil, nil
			}
			return textOf(rv.Elem().Interface())
		case reflect.String:
			s = rv.String()
		case reflect.Bool:
			s = strconv.FormatBool(rv.Bool())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			s = strconv.FormatInt(rv.Int(), 10)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			s = strconv.FormatUint(rv.Uint(), 10)
		case reflect.Float32:
			s = strconv.FormatFloat(rv.Float(), 'f', -1, 32)
		case reflect.Float64:
			s = strconv.FormatFloat(rv.Float(), 'f', -1, 64)
		default:
			// Maps, slices and structs: their JSON, for json/jsonb columns.
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("a %T value cannot be written: %w", v, err)
			}
			s = string(b)
		}
	}
	return &s, nil
}

// SerdeMapper maps records whose value a serde decodes (eddy's Avro,
// Protobuf or JSON Schema serdes of the schema registry, or any
// serde.Serde): fields returns the decoded value's columns. As with
// JSONMapper, a non-empty record key fills keyColumn (when not empty) and
// a tombstone deletes the row of keyColumn = the key. A decode error is
// the record's fault (dead-lettered), except one wrapping
// serde.ErrUnavailable (the registry unreachable): the sink stops on it
// rather than blame the record.
func SerdeMapper[V any](keyColumn string, s serde.Serde[V], fields func(V) map[string]any) Mapper {
	return func(key, value []byte) (Row, error) {
		if value == nil {
			return tombstone(keyColumn, key)
		}
		v, err := s.Deserialize(value)
		if err != nil {
			return Row{}, fmt.Errorf("decode value: %w", err)
		}
		vals := fields(v)
		if keyColumn != "" && len(key) > 0 {
			if vals == nil {
				vals = map[string]any{}
			}
			vals[keyColumn] = string(key)
		}
		return Row{Values: vals}, nil
	}
}
