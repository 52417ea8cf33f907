package pipeline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/eddy-streams/eddy/examples/ledger/pipeline/ledgerpb"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/serde/avro"
	"github.com/eddy-streams/eddy/serde/protobuf"
	"github.com/eddy-streams/eddy/serde/registry"
)

// Format is how payments and balances are encoded on their topics. JSON,
// the default, is the examples' contract; Avro and Protobuf are written in
// the Confluent wire format through a schema registry, as a Kafka shop's
// other clients write them. The record key is the account id as a plain
// string in every format.
type Format string

const (
	JSON     Format = "json"
	Avro     Format = "avro"
	Protobuf Format = "protobuf"
)

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case JSON, Avro, Protobuf:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q: use json, avro or protobuf", s)
}

// The Avro schemas of payments and balances: the fields of their JSON.
// A payment's ts defaults to 0 (absent), as in JSON.
const (
	PaymentAvroSchema = `{"type":"record","name":"Payment","namespace":"eddy.examples.ledger","fields":[` +
		`{"name":"id","type":"string"},{"name":"account","type":"string"},{"name":"amount","type":"long"},` +
		`{"name":"ts","type":"long","default":0}]}`
	BalanceAvroSchema = `{"type":"record","name":"Balance","namespace":"eddy.examples.ledger","fields":[` +
		`{"name":"id","type":"string"},{"name":"account","type":"string"},{"name":"amount","type":"long"},` +
		`{"name":"seq","type":"long"},{"name":"balance","type":"long"}]}`
)

// Codecs are the serdes of payments and balances in one format.
type Codecs struct {
	Format   Format
	Payments serde.Serde[Payment]
	Balances serde.Serde[Balance]
}

// JSONCodecs are the examples' default serdes, which need no registry.
func JSONCodecs() Codecs {
	return Codecs{Format: JSON, Payments: PaymentSerde{}, Balances: BalanceSerde{}}
}

// NewCodecs returns the serdes of format for the payments of topic input
// and the balances of topic output (their subjects are <topic>-value),
// with reg the registry client (nil for JSON). It registers (or finds)
// the balances' schema, so that one the registry refuses, e.g. as
// incompatible with the subject's versions, stops the app at start with
// the registry's message (eddy.Run would too, checking its sinks). The
// payments' serde registers nothing: a reader reads whatever schema each
// payment names.
func NewCodecs(ctx context.Context, format Format, reg *registry.Client, input, output string) (Codecs, error) {
	c := Codecs{Format: format}
	var err error
	if c.Payments, err = PaymentCodec(format, reg, input); err != nil {
		return c, err
	}
	if c.Balances, err = balanceCodec(format, reg, output); err != nil {
		return c, err
	}
	if err := check(ctx, c.Balances); err != nil {
		return c, fmt.Errorf("the balances' schema: %w", err)
	}
	return c, nil
}

// PaymentCodec returns the serde of format for the payments of topic; the
// windowed example writes its late payments with one. Its schema is
// registered by its first Serialize or its Check (which eddy.Run calls
// for a sink's serde), never by reading.
func PaymentCodec(format Format, reg *registry.Client, topic string) (serde.Serde[Payment], error) {
	var s serde.Serde[Payment]
	var err error
	switch format {
	case JSON:
		return PaymentSerde{}, nil
	case Avro:
		s, err = avro.Value[Payment](reg, topic, PaymentAvroSchema)
	case Protobuf:
		var p *protobuf.Serde[*ledgerpb.Payment]
		p, err = protobuf.Value[*ledgerpb.Payment](reg, topic)
		s = mapped[Payment, *ledgerpb.Payment]{p, paymentToProto, paymentFromProto}
	default:
		return nil, fmt.Errorf("unknown format %q: use json, avro or protobuf", format)
	}
	if err != nil {
		return nil, fmt.Errorf("the payments' serde: %w", err)
	}
	return checkedPayments{s}, nil
}

func balanceCodec(format Format, reg *registry.Client, topic string) (serde.Serde[Balance], error) {
	var err error
	switch format {
	case JSON:
		return BalanceSerde{}, nil
	case Avro:
		var b *avro.Serde[Balance]
		if b, err = avro.Value[Balance](reg, topic, BalanceAvroSchema); err == nil {
			return b, nil
		}
	case Protobuf:
		var b *protobuf.Serde[*ledgerpb.Balance]
		if b, err = protobuf.Value[*ledgerpb.Balance](reg, topic); err == nil {
			return mapped[Balance, *ledgerpb.Balance]{b, balanceToProto, balanceFromProto}, nil
		}
	default:
		err = fmt.Errorf("unknown format %q: use json, avro or protobuf", format)
	}
	return nil, fmt.Errorf("the balances' serde: %w", err)
}

// checker is a registry serde's Check, which the wrappers below pass on so
// that eddy.Run finds it on a sink's serde.
type checker interface {
	Check(ctx context.Context) error
}

// check calls s's Check, if it has one.
func check(ctx context.Context, s any) error {
	if c, ok := s.(checker); ok {
		return c.Check(ctx)
	}
	return nil
}

// checkedPayments refuses, as PaymentSerde does for JSON, a payment
// whose id or account is empty or not valid UTF-8: Avro and Protobuf
// decode an absent string as "", which would count a payment without an
// account in the account "". An absent amount cannot be told apart: Avro
// requires the field, and Protobuf (proto3) decodes an absent int64 as 0,
// as it encodes a 0; so a Protobuf payment without an amount counts as
// one of 0, where a JSON one is refused.
type checkedPayments struct{ serde.Serde[Payment] }

func (c checkedPayments) Check(ctx context.Context) error { return check(ctx, c.Serde) }

func (c checkedPayments) Deserialize(b []byte) (Payment, error) {
	p, err := c.Serde.Deserialize(b)
	if err != nil {
		return Payment{}, err
	}
	if !utf8.ValidString(p.ID) || !utf8.ValidString(p.Account) {
		return Payment{}, errors.New("payment: the id or account is not valid UTF-8")
	}
	return checkPayment(p, p.ID != "", p.Account != "", true)
}

// mapped is a serde of T that encodes T as the message M of a Protobuf
// serde: the pipeline keeps its own types in every format.
type mapped[T any, M any] struct {
	inner serde.Serde[M]
	to    func(T) M
	from  func(M) T
}

func (m mapped[T, M]) Check(ctx context.Context) error { return check(ctx, m.inner) }

func (m mapped[T, M]) Serialize(dst []byte, v T) ([]byte, error) {
	return m.inner.Serialize(dst, m.to(v))
}

func (m mapped[T, M]) Deserialize(b []byte) (T, error) {
	v, err := m.inner.Deserialize(b)
	if err != nil {
		var zero T
		return zero, err
	}
	return m.from(v), nil
}

func paymentToProto(p Payment) *ledgerpb.Payment {
	return &ledgerpb.Payment{Id: p.ID, Account: p.Account, Amount: p.Amount, Ts: p.TS}
}

func paymentFromProto(m *ledgerpb.Payment) Payment {
	return Payment{ID: m.GetId(), Account: m.GetAccount(), Amount: m.GetAmount(), TS: m.GetTs()}
}

func balanceToProto(b Balance) *ledgerpb.Balance {
	return &ledgerpb.Balance{Id: b.ID, Account: b.Account, Amount: b.Amount, Seq: b.Seq, Balance: b.Balance}
}

func balanceFromProto(m *ledgerpb.Balance) Balance {
	return Balance{ID: m.GetId(), Account: m.GetAccount(), Amount: m.GetAmount(), Seq: m.GetSeq(), Balance: m.GetBalance()}
}

// FormatFlags are the --format and --schema-registry flags, which the
// ledger and the windowed example share.
type FormatFlags struct {
	format, registry *string
}

// AddFormatFlags defines --format and --schema-registry on fs.
func AddFormatFlags(fs *flag.FlagSet) *FormatFlags {
	return &FormatFlags{
		format:   fs.String("format", string(JSON), "encoding of the payments and the outputs: json, avro or protobuf (avro and protobuf in the Confluent wire format, through --schema-registry)"),
		registry: fs.String("schema-registry", "", "`URL` of a Confluent-compatible schema registry for --format avro or protobuf, e.g. http://127.0.0.1:8081 (eddy broker --schema-registry 127.0.0.1:8081 serves one); user:password@ in the URL is sent as basic auth"),
	}
}

// Parse checks the flags and returns the format and, for Avro and
// Protobuf, the registry's client (retrying an unreachable registry for up
// to timeout, logging to log), with release, which the caller defers. The
// client is closed when ctx ends (SIGTERM): a record waiting for an
// unreachable registry must not hold the stop for --broker-timeout
// (closing ends its retries; the record is processed again at the next
// start, never dead-lettered).
func (f *FormatFlags) Parse(ctx context.Context, log *slog.Logger, timeout time.Duration) (format Format, reg *registry.Client, release func(), err error) {
	release = func() {}
	if format, reg, err = f.parse(log, timeout); err != nil || reg == nil {
		return format, nil, release, err
	}
	stop := context.AfterFunc(ctx, func() { reg.Close() })
	return format, reg, func() { stop(); reg.Close() }, nil
}

func (f *FormatFlags) parse(log *slog.Logger, timeout time.Duration) (Format, *registry.Client, error) {
	format, err := ParseFormat(*f.format)
	if err != nil {
		return "", nil, fmt.Errorf("--format: %w", err)
	}
	if format == JSON {
		if *f.registry != "" {
			return "", nil, errors.New("--schema-registry is for --format avro or protobuf: JSON needs no registry")
		}
		return format, nil, nil
	}
	if *f.registry == "" {
		return "", nil, fmt.Errorf("--format %s needs --schema-registry URL, e.g. http://127.0.0.1:8081 (`eddy broker --schema-registry 127.0.0.1:8081` serves one)", format)
	}
	cfg, err := registry.ConfigFromURL(*f.registry)
	if err != nil {
		return "", nil, fmt.Errorf("--schema-registry %q: %w", *f.registry, err)
	}
	cfg.Logger, cfg.Timeout = log, timeout
	reg, err := registry.New(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("--schema-registry: %w", err)
	}
	return format, reg, nil
}
