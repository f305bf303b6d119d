package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/redis/go-redis/v9"
)

// DefaultAuditLen is how many audit records an AuditLog keeps (about: the
// stream is trimmed with MAXLEN ~).
const DefaultAuditLen = 10000

// AuditRecord is one entry of the operators' audit log: who did what,
// when, and how it ended.
type AuditRecord struct {
	// ID is the record's stream id (set by Recent).
	ID string `json:"id,omitempty"`
	// At is when it was written.
	At time.Time `json:"at"`
	// Who is the authenticated user; Remote the client's address.
	Who    string `json:"who"`
	Remote string `json:"remote,omitempty"`
	// Tool names the program that acted ("dashboard").
	Tool string `json:"tool"`
	// Action is trigger, pause, resume, redrive, replay-plan or
	// replay-execute; Target what it acted on (a job, a dead letter, a
	// group); Params its parameters.
	Action string            `json:"action"`
	Target string            `json:"target"`
	Params map[string]string `json:"params,omitempty"`
	// Outcome is "started" before the action and "ok", "refused" or
	// "failed" after it; Detail says what happened (the window id, the
	// error).
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
	// Request ties the records of one action together.
	Request string `json:"request"`
}

// AuditLog is the operators' audit log of one deployment: a Redis stream
// "kjob:{<namespace>}:audit" capped at about MaxLen records (XADD MAXLEN
// ~), next to kjobctl's other records (pauses, redrives). A stream keeps
// records in time order with server-assigned ids, trims the oldest in
// whole blocks, and is readable by any Redis client (XREVRANGE).
type AuditLog struct {
	rdb    redis.UniversalClient
	key    string
	maxLen int64
}

// NewAuditLog returns the audit log of namespace, keeping about maxLen
// records (0: DefaultAuditLen).
func NewAuditLog(rdb redis.UniversalClient, namespace string, maxLen int64) (*AuditLog, error) {
	switch {
	case rdb == nil:
		return nil, &configerr.Error{Op: "operator: NewAuditLog", Field: "Redis client", Reason: "is nil"}
	case namespace == "":
		return nil, &configerr.Error{Op: "operator: NewAuditLog", Field: "namespace", Reason: `is empty; use the deployment's namespace, e.g. "kjob"`}
	case maxLen < 0:
		return nil, &configerr.Error{Op: "operator: NewAuditLog", Field: "maxLen", Value: maxLen, Reason: fmt.Sprintf(": want a positive number of records, or 0 for %d", DefaultAuditLen)}
	case maxLen == 0:
		maxLen = DefaultAuditLen
	}
	return &AuditLog{rdb: rdb, key: names.Deployment{Namespace: namespace}.AuditKey(), maxLen: maxLen}, nil
}

// Key returns the stream's key.
func (a *AuditLog) Key() string { return a.key }

// Append writes rec to the log.
func (a *AuditLog) Append(ctx context.Context, rec AuditRecord) error {
	rec.ID = ""
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	err = a.rdb.XAdd(ctx, &redis.XAddArgs{Stream: a.key, MaxLen: a.maxLen, Approx: true,
		Values: []any{"action", rec.Action, "who", rec.Who, "outcome", rec.Outcome, "record", b}}).Err()
	if err != nil {
		return fmt.Errorf("operator: audit log %s: %w", a.key, err)
	}
	return nil
}

// Recent returns the newest n records, newest first.
func (a *AuditLog) Recent(ctx context.Context, n int64) ([]AuditRecord, error) {
	msgs, err := a.rdb.XRevRangeN(ctx, a.key, "+", "-", n).Result()
	if err != nil {
		return nil, fmt.Errorf("operator: audit log %s: %w", a.key, err)
	}
	out := make([]AuditRecord, 0, len(msgs))
	for _, m := range msgs {
		s, _ := m.Values["record"].(string)
		var rec AuditRecord
		if err := json.Unmarshal([]byte(s), &rec); err != nil {
			return nil, fmt.Errorf("operator: audit log %s: record %s is not valid: %w", a.key, m.ID, err)
		}
		rec.ID = m.ID
		out = append(out, rec)
	}
	return out, nil
}
