package registry

import "fmt"

// SubjectNameStrategy names the subject a serde registers and looks up its
// writer schema under, as Confluent's key/value.subject.name.strategy:
// from the topic, whether the serde is a key's, and the full name of the
// schema's record ("" for a schema that is not a named type).
type SubjectNameStrategy func(topic string, key bool, record string) (string, error)

// TopicName is the default strategy (Confluent's TopicNameStrategy):
// "<topic>-key" or "<topic>-value", so a topic holds one type, which
// evolves.
func TopicName(topic string, key bool, _ string) (string, error) {
	if topic == "" {
		return "", fmt.Errorf("TopicNameStrategy needs a topic")
	}
	if key {
		return topic + "-key", nil
	}
	return topic + "-value", nil
}

// RecordName is Confluent's RecordNameStrategy: the record's full name,
// so that one type evolves the same way in every topic and a topic may
// hold several types.
func RecordName(_ string, _ bool, record string) (string, error) {
	if record == "" {
		return "", fmt.Errorf("RecordNameStrategy needs a named schema (a record, an enum or a fixed)")
	}
	return record, nil
}

// TopicRecordName is Confluent's TopicRecordNameStrategy:
// "<topic>-<record full name>", several types per topic, each evolving
// within its topic.
func TopicRecordName(topic string, key bool, record string) (string, error) {
	if topic == "" {
		return "", fmt.Errorf("TopicRecordNameStrategy needs a topic")
	}
	if _, err := RecordName(topic, key, record); err != nil {
		return "", fmt.Errorf("TopicRecordNameStrategy: %w", err)
	}
	return topic + "-" + record, nil
}

// Writer is how a serde finds the id of the schema it writes with, as
// Confluent's serializer settings; build it with options.
type Writer struct {
	// Subject names the subject (default TopicName).
	Subject SubjectNameStrategy
	// AutoRegister registers the serde's schema under the subject
	// (auto.register.schemas, default true). Off, the schema must be
	// registered already: the serde looks it up.
	AutoRegister bool
	// UseLatest writes with the subject's latest schema instead of the
	// serde's own (use.latest.version; Confluent uses it with
	// auto-register off, and so does the serde: it registers nothing).
	UseLatest bool
}

// Option sets a Writer field.
type Option func(*Writer)

// WithSubjectNameStrategy sets the subject name strategy.
func WithSubjectNameStrategy(s SubjectNameStrategy) Option {
	return func(w *Writer) { w.Subject = s }
}

// WithoutAutoRegister turns auto-register off: the schema must be
// registered under the subject already (by a deployment step, as
// production registries usually require).
func WithoutAutoRegister() Option { return func(w *Writer) { w.AutoRegister = false } }

// WithLatestVersion writes with the subject's latest registered schema
// (use.latest.version); it implies WithoutAutoRegister.
func WithLatestVersion() Option {
	return func(w *Writer) { w.UseLatest, w.AutoRegister = true, false }
}

// NewWriter applies opts to the defaults: TopicName, auto-register on.
func NewWriter(opts ...Option) Writer {
	w := Writer{Subject: TopicName, AutoRegister: true}
	for _, o := range opts {
		o(&w)
	}
	if w.Subject == nil {
		w.Subject = TopicName
	}
	return w
}
