package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/eddy-streams/eddy/serde"
)

// The ledger's JSON is flat and small, and decoding it with encoding/json
// took a third of the pipeline's CPU (profile in BENCHMARKS.md). These
// codecs handle the common shape, an object of plain strings and integers,
// in one pass without reflection or allocation beyond the strings, and fall
// back to encoding/json for anything else (escapes, other whitespace,
// unknown fields), so what they accept is exactly what encoding/json
// accepts.

var errSlowPath = errors.New("not the fast-path shape")

// decodePaymentFast parses {"id":"..","account":"..","amount":N} with the
// fields in any order and no string escapes, and an optional "ts":N (the
// windowed example's payments carry their event time).
func decodePaymentFast(b []byte) (p Payment, hasID, hasAccount, hasAmount bool, err error) {
	hasTS := false
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return p, false, false, false, errSlowPath
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return p, false, false, false, errSlowPath
	}
	for {
		var key []byte
		if key, i, err = plainString(b, i); err != nil {
			return p, false, false, false, err
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return p, false, false, false, errSlowPath
		}
		i = skipSpace(b, i+1)
		switch string(key) {
		case "id", "account":
			var v []byte
			if v, i, err = plainString(b, i); err != nil {
				return p, false, false, false, err
			}
			if key[0] == 'i' {
				if hasID {
					return p, false, false, false, errSlowPath
				}
				p.ID, hasID = string(v), true
			} else {
				if hasAccount {
					return p, false, false, false, errSlowPath
				}
				p.Account, hasAccount = string(v), true
			}
		case "amount", "ts":
			j := i
			if j < len(b) && b[j] == '-' {
				j++
			}
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			n, perr := strconv.ParseInt(string(b[i:j]), 10, 64)
			if perr != nil || (j-i > 1 && b[i] == '0') || (j-i > 2 && b[i] == '-' && b[i+1] == '0') {
				return p, false, false, false, errSlowPath
			}
			if key[0] == 'a' {
				if hasAmount {
					return p, false, false, false, errSlowPath
				}
				p.Amount, hasAmount = n, true
			} else {
				if hasTS {
					return p, false, false, false, errSlowPath
				}
				p.TS, hasTS = n, true
			}
			i = j
		default:
			return p, false, false, false, errSlowPath
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return p, false, false, false, errSlowPath
		}
		if b[i] == '}' {
			if skipSpace(b, i+1) != len(b) {
				return p, false, false, false, errSlowPath
			}
			return p, hasID, hasAccount, hasAmount, nil
		}
		if b[i] != ',' {
			return p, false, false, false, errSlowPath
		}
		i = skipSpace(b, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] that has no escapes, no control
// characters and only ASCII (so no UTF-8 validation is needed).
func plainString(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, errSlowPath
	}
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			return b[i+1 : j], j + 1, nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return nil, i, errSlowPath
		}
	}
	return nil, i, errSlowPath
}

// appendBalance appends the JSON of b, byte for byte what json.Marshal
// writes when the strings need no escaping.
func appendBalance(dst []byte, b Balance) ([]byte, error) {
	if !plainASCII(b.ID) || !plainASCII(b.Account) {
		// json.Marshal would write U+FFFD for invalid UTF-8.
		if !utf8.ValidString(b.ID) || !utf8.ValidString(b.Account) {
			return dst, errors.New("balance: the id or account is not valid UTF-8")
		}
		out, err := json.Marshal(b)
		if err != nil {
			return dst, fmt.Errorf("balance: %w", err)
		}
		return append(dst, out...), nil
	}
	dst = append(dst, `{"id":"`...)
	dst = append(dst, b.ID...)
	dst = append(dst, `","account":"`...)
	dst = append(dst, b.Account...)
	dst = append(dst, `","amount":`...)
	dst = strconv.AppendInt(dst, b.Amount, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, b.Seq, 10)
	dst = append(dst, `,"balance":`...)
	dst = strconv.AppendInt(dst, b.Balance, 10)
	return append(dst, '}'), nil
}

// plainASCII reports whether json.Marshal writes s unescaped.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// BalanceSerde encodes balances as JSON.
type BalanceSerde struct{}

func (BalanceSerde) Serialize(dst []byte, b Balance) ([]byte, error) { return appendBalance(dst, b) }

func (BalanceSerde) Deserialize(b []byte) (Balance, error) {
	var v Balance
	if err := serde.CheckJSONUnicode(b); err != nil {
		return v, fmt.Errorf("balance: %w", err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("balance: %w", err)
	}
	return v, nil
}
