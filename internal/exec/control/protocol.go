package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Version is the schema version of control records.
const Version = 1

// HeaderKind names the kind of a control record.
const HeaderKind = "kjob-control-kind"

// Record kinds.
const (
	// KindSeek is a SeekRequest.
	KindSeek = "seek"
	// KindSeekAck is a SeekAck.
	KindSeekAck = "seek-ack"
)

// ErrInvalid matches errors of records that are not valid control records.
var ErrInvalid = errors.New("control: invalid record")

// SeekRequest asks the owners of partitions of Topic in Group to move their
// consumption to the given offsets.
type SeekRequest struct {
	V int `json:"v"`
	// ID identifies the request; acks carry it.
	ID string `json:"id"`
	// Group is the consumer group of the workers.
	Group string `json:"group"`
	// Topic is the windows topic.
	Topic string `json:"topic"`
	// Offsets maps partition to the absolute target offset.
	Offsets map[int32]int64 `json:"offsets"`
	// IssuedBy names the operator or tool.
	IssuedBy string `json:"issued_by,omitempty"`
	// IssuedAt is when the request was written.
	IssuedAt time.Time `json:"issued_at"`
	// SkipUnsettled, for a partition moved forward (From below its
	// target), settles the windows of the records skipped over that are
	// not settled as skipped by the replay (see Skipper) instead of
	// leaving them unsettled. The operator must have asked for it.
	SkipUnsettled bool `json:"skip_unsettled,omitempty"`
	// From maps partition to the committed offset the operator's plan
	// saw: with SkipUnsettled, the start of the range skipped over.
	From map[int32]int64 `json:"from,omitempty"`
}

// SeekAck reports that a worker applied (or failed to apply) a SeekRequest
// to one partition it owns.
type SeekAck struct {
	V int `json:"v"`
	// RequestID is the SeekRequest's ID.
	RequestID string `json:"request_id"`
	// Group and Topic repeat the request's.
	Group string `json:"group"`
	Topic string `json:"topic"`
	// Partition is the partition the worker moved.
	Partition int32 `json:"partition"`
	// Offset is the offset it moved to.
	Offset int64 `json:"offset"`
	// Member is the worker id.
	Member string `json:"member"`
	// Error is empty on success.
	Error string `json:"error,omitempty"`
	// At is when the seek was applied.
	At time.Time `json:"at"`
	// Skipped counts the windows settled as skipped by the replay
	// (SeekRequest.SkipUnsettled).
	Skipped int `json:"skipped,omitempty"`
	// Duplicate says the request id was applied to the partition already
	// (the requester re-sent it): this ack repeats that one's result, and
	// nothing was moved again.
	Duplicate bool `json:"duplicate,omitempty"`
}

func encode(topic, kind, key string, v any) (*kgo.Record, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("control: encode %s: %w", kind, err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: b, Headers: []kgo.RecordHeader{{Key: HeaderKind, Value: []byte(kind)}}}, nil
}

// Record encodes r for the control topic (key = group).
func (r *SeekRequest) Record(topic string) (*kgo.Record, error) {
	r.V = Version
	return encode(topic, KindSeek, r.Group, r)
}

// Record encodes a for the control topic (key = group).
func (a *SeekAck) Record(topic string) (*kgo.Record, error) {
	a.V = Version
	return encode(topic, KindSeekAck, a.Group, a)
}

// Kind returns the kind header of a control record ("" if none).
func Kind(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == HeaderKind {
			return string(h.Value)
		}
	}
	return ""
}

// ParseSeekRequest decodes a KindSeek record.
func ParseSeekRequest(r *kgo.Record) (*SeekRequest, error) {
	var req SeekRequest
	if err := decode(r, KindSeek, &req, &req.V); err != nil {
		return nil, err
	}
	if req.ID == "" || req.Group == "" || req.Topic == "" || len(req.Offsets) == 0 {
		return nil, fmt.Errorf("%w: seek request at offset %d lacks id, group, topic or offsets", ErrInvalid, r.Offset)
	}
	return &req, nil
}

// ParseSeekAck decodes a KindSeekAck record.
func ParseSeekAck(r *kgo.Record) (*SeekAck, error) {
	var a SeekAck
	if err := decode(r, KindSeekAck, &a, &a.V); err != nil {
		return nil, err
	}
	return &a, nil
}

func decode(r *kgo.Record, kind string, v any, ver *int) error {
	if k := Kind(r); k != kind {
		return fmt.Errorf("%w: offset %d: header %s = %q, want %q", ErrInvalid, r.Offset, HeaderKind, k, kind)
	}
	if err := json.Unmarshal(r.Value, v); err != nil {
		return fmt.Errorf("%w: offset %d: %v", ErrInvalid, r.Offset, err)
	}
	if *ver != Version {
		return fmt.Errorf("%w: offset %d: schema version %d, this kjob reads %d", ErrInvalid, r.Offset, *ver, Version)
	}
	return nil
}
