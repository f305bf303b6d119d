package jobmsg

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// State is the value of a record of the producer's state topic: the last
// window the leader published (or skipped while the job was paused) for
// one job. The state topic is compacted by job name (the record key), so
// it keeps one record per job. The producer writes it in the transaction
// that publishes the window, and a new leader reads it to know where each
// job's windows resume; kjobctl status and internal/ops/inspect read it to show
// what the producer last did.
//
// A record with an empty LastID is a baseline: no window of the job has
// been published yet, and LastWindow is when a leader first saw the job
// (its windows after that instant are to be published).
//
// On the wire it is a JSON object, schema version 1:
//
//	{"v": 1, "namespace": "prod", "job": "report", "last_window": "2026-11-22T10:00:00Z",
//	 "last_id": "report@2026-11-22T10:00:00Z", "published_at": "2026-11-22T10:00:00.002Z"}
type State struct {
	// Namespace is the namespace of the deployment whose producer wrote
	// the record (names.Deployment). A producer refuses to lead from a
	// state topic whose jobs belong to another namespace. Empty in a
	// record written before state records carried their namespace.
	Namespace string
	// Job is the job name (also the record key).
	Job string
	// LastWindow is the start of the job's last window, or for a
	// baseline the instant the job was first seen.
	LastWindow time.Time
	// LastID is that window's id; empty for a baseline.
	LastID string
	// PublishedAt is when the leader wrote the record.
	PublishedAt time.Time
}

// stateWire is State's JSON form.
type stateWire struct {
	V           int       `json:"v"`
	Namespace   string    `json:"namespace,omitempty"`
	Job         string    `json:"job"`
	LastWindow  time.Time `json:"last_window"`
	LastID      string    `json:"last_id"`
	PublishedAt time.Time `json:"published_at"`
}

// StateRecord encodes s as a record of the state topic topic: key = job,
// value = JSON (times in UTC).
func StateRecord(topic string, s State) (*kgo.Record, error) {
	if s.Job == "" {
		return nil, errors.New("jobmsg: state record: no job name")
	}
	b, err := json.Marshal(stateWire{V: Version, Namespace: s.Namespace, Job: s.Job, LastWindow: s.LastWindow.UTC(), LastID: s.LastID, PublishedAt: s.PublishedAt.UTC()})
	if err != nil {
		return nil, fmt.Errorf("jobmsg: state record of %s: %w", s.Job, err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(s.Job), Value: b}, nil
}

// ParseState decodes the value of a state-topic record. A value that is
// not a state record, or names no job, is an error.
func ParseState(value []byte) (State, error) {
	var v stateWire
	if err := json.Unmarshal(value, &v); err != nil {
		return State{}, fmt.Errorf("jobmsg: state record: %w", err)
	}
	if v.Job == "" {
		return State{}, errors.New("jobmsg: state record: no job name")
	}
	return State{Namespace: v.Namespace, Job: v.Job, LastWindow: v.LastWindow, LastID: v.LastID, PublishedAt: v.PublishedAt}, nil
}
