package specs

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderKind is the header naming the kind of a control-topic record: the
// same key as internal/exec/control's HeaderKind (a test there keeps them
// equal), so the workers' agents and the producer share one topic.
const HeaderKind = "kjob-control-kind"

// MalformedError is a record of the schedules topic, the change log or the
// control topic that is not what this kjob writes there: garbage, a
// foreign record, another schema version. Readers log it, count it and
// skip it; a job keeps its last good version.
type MalformedError struct {
	Topic  string
	Offset int64
	Key    string
	Reason string
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("specs: malformed record %s@%d (key %q): %s", e.Topic, e.Offset, e.Key, e.Reason)
}

func malformed(r *kgo.Record, format string, args ...any) error {
	return &MalformedError{Topic: r.Topic, Offset: r.Offset, Key: string(r.Key), Reason: fmt.Sprintf(format, args...)}
}

// SpecRecord encodes r for the schedules topic: key = job, value = JSON,
// header HeaderVersion = r.Version. It fills r.V.
func SpecRecord(topic string, r *Record) (*kgo.Record, error) {
	if r.Job == "" || r.Version < 1 || r.Namespace == "" {
		return nil, fmt.Errorf("specs: record of job %q version %d namespace %q: job, version >= 1 and namespace are required", r.Job, r.Version, r.Namespace)
	}
	r.V = Version
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("specs: encode %s v%d: %w", r.Job, r.Version, err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(r.Job), Value: b, Headers: []kgo.RecordHeader{versionHeader(r.Version)}}, nil
}

// Tombstone is the schedules-topic record of a delete: key = job, no value,
// header HeaderVersion = the version the delete gave the job.
func Tombstone(topic, job string, version int64) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(job), Headers: []kgo.RecordHeader{versionHeader(version)}}
}

func versionHeader(v int64) kgo.RecordHeader {
	return kgo.RecordHeader{Key: HeaderVersion, Value: []byte(strconv.FormatInt(v, 10))}
}

// Entry is one decoded schedules-topic record: a spec, or a delete.
type Entry struct {
	Job     string
	Version int64
	// Record is nil for a tombstone.
	Record *Record
}

// ParseSpecRecord decodes a schedules-topic record. namespace, if not
// empty, must be the record's. An error is a *MalformedError.
func ParseSpecRecord(r *kgo.Record, namespace string) (Entry, error) {
	job := string(r.Key)
	if job == "" {
		return Entry{}, malformed(r, "no key: the key must be the job name")
	}
	if r.Value == nil {
		var v int64
		for _, h := range r.Headers {
			if h.Key == HeaderVersion {
				n, err := strconv.ParseInt(string(h.Value), 10, 64)
				if err != nil || n < 1 {
					return Entry{}, malformed(r, "tombstone header %s = %q: want a version >= 1", HeaderVersion, h.Value)
				}
				v = n
			}
		}
		return Entry{Job: job, Version: v}, nil
	}
	var rec Record
	if err := json.Unmarshal(r.Value, &rec); err != nil {
		return Entry{}, malformed(r, "not a spec record: %v", err)
	}
	switch {
	case rec.V != Version:
		return Entry{}, malformed(r, "schema version %d, this kjob reads %d", rec.V, Version)
	case rec.Job != job:
		return Entry{}, malformed(r, "job %q differs from the key", rec.Job)
	case rec.Spec.Name != job:
		return Entry{}, malformed(r, "spec name %q differs from the key", rec.Spec.Name)
	case rec.Version < 1:
		return Entry{}, malformed(r, "version %d: want >= 1", rec.Version)
	case namespace != "" && rec.Namespace != namespace:
		return Entry{}, malformed(r, "namespace %q, this deployment's is %q", rec.Namespace, namespace)
	}
	return Entry{Job: job, Version: rec.Version, Record: &rec}, nil
}

// ChangeRecord encodes c for the change log: key = job, value = JSON. It
// fills c.V.
func ChangeRecord(topic string, c *Change) (*kgo.Record, error) {
	if c.Job == "" || c.ID == "" {
		return nil, fmt.Errorf("specs: change %q of job %q: id and job are required", c.ID, c.Job)
	}
	c.V = Version
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("specs: encode change %s: %w", c.ID, err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(c.Job), Value: b}, nil
}

// ParseChange decodes a change-log record; an error is a *MalformedError.
func ParseChange(r *kgo.Record) (*Change, error) {
	var c Change
	if err := json.Unmarshal(r.Value, &c); err != nil {
		return nil, malformed(r, "not a change record: %v", err)
	}
	switch {
	case c.V != Version:
		return nil, malformed(r, "schema version %d, this kjob reads %d", c.V, Version)
	case c.Job == "" || c.Job != string(r.Key):
		return nil, malformed(r, "job %q differs from the key", c.Job)
	}
	return &c, nil
}

func controlRecord(topic, kind, key string, v any) (*kgo.Record, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("specs: encode %s: %w", kind, err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: b, Headers: []kgo.RecordHeader{{Key: HeaderKind, Value: []byte(kind)}}}, nil
}

// Kind returns a control-topic record's kind header ("" if none).
func Kind(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == HeaderKind {
			return string(h.Value)
		}
	}
	return ""
}

// Record encodes q for the control topic (key = namespace). It fills q.V.
func (q *Request) Record(topic string) (*kgo.Record, error) {
	q.V = Version
	return controlRecord(topic, KindRequest, q.Namespace, q)
}

// Record encodes s for the control topic (key = namespace). It fills s.V.
func (s *Result) Record(topic string) (*kgo.Record, error) {
	s.V = Version
	return controlRecord(topic, KindResult, s.Namespace, s)
}

// ParseRequest decodes a KindRequest record; an error is a
// *MalformedError.
func ParseRequest(r *kgo.Record) (*Request, error) {
	if k := Kind(r); k != KindRequest {
		return nil, malformed(r, "kind %q, want %q", k, KindRequest)
	}
	var q Request
	if err := json.Unmarshal(r.Value, &q); err != nil {
		return nil, malformed(r, "not a schedule request: %v", err)
	}
	switch {
	case q.V != Version:
		return nil, malformed(r, "schema version %d, this kjob reads %d", q.V, Version)
	case q.ID == "" || q.Namespace == "":
		return nil, malformed(r, "request lacks an id or a namespace")
	}
	return &q, nil
}

// ParseResult decodes a KindResult record; an error is a *MalformedError.
func ParseResult(r *kgo.Record) (*Result, error) {
	if k := Kind(r); k != KindResult {
		return nil, malformed(r, "kind %q, want %q", k, KindResult)
	}
	var s Result
	if err := json.Unmarshal(r.Value, &s); err != nil {
		return nil, malformed(r, "not a schedule result: %v", err)
	}
	switch {
	case s.V != Version:
		return nil, malformed(r, "schema version %d, this kjob reads %d", s.V, Version)
	case s.RequestID == "":
		return nil, malformed(r, "result lacks a request id")
	}
	return &s, nil
}
