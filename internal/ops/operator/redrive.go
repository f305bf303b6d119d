package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/dlq"
	"github.com/redis/go-redis/v9"
)

// ErrAlreadyRedriven is returned by Redrives.Begin for a dead letter that
// was redriven before (see the returned Redrive).
var ErrAlreadyRedriven = errors.New("operator: dead letter already redriven")

// field is the redrive hash's field of the letter at l.
func field(l dlq.Origin) string {
	return l.Topic + "/" + strconv.FormatInt(int64(l.Partition), 10) + "/" + strconv.FormatInt(l.Offset, 10)
}

func parseLetter(f string) (dlq.Origin, bool) {
	i := strings.LastIndexByte(f, '/')
	if i <= 0 {
		return dlq.Origin{}, false
	}
	j := strings.LastIndexByte(f[:i], '/')
	if j <= 0 {
		return dlq.Origin{}, false
	}
	p, err1 := strconv.ParseInt(f[j+1:i], 10, 32)
	o, err2 := strconv.ParseInt(f[i+1:], 10, 64)
	if err1 != nil || err2 != nil {
		return dlq.Origin{}, false
	}
	return dlq.Origin{Topic: f[:j], Partition: int32(p), Offset: o}, true
}

// Redrive records that an operator republished a dead letter.
type Redrive struct {
	// Letter locates the dead letter in the dead-letter topic.
	Letter dlq.Origin `json:"letter"`
	// WindowID is the dead letter's window; empty for an undecodable record.
	WindowID string `json:"window_id,omitempty"`
	// At is when the redrive started, By who started it.
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
	// Topic, Partition and Offset locate the republished record; Topic is
	// empty while the redrive is in progress (or if it died before the
	// record was acknowledged).
	Topic     string `json:"republished_topic,omitempty"`
	Partition int32  `json:"republished_partition"`
	Offset    int64  `json:"republished_offset"`
	// With names another letter of the same window that this redrive
	// republished instead (one window is republished once per redrive).
	With string `json:"with,omitempty"`
}

// Done reports whether the republished record was acknowledged.
func (r Redrive) Done() bool { return r.Topic != "" || r.With != "" }

// Redrives is the record of redriven dead letters of one deployment, in
// Redis (hash "kjob:{<namespace>}:dlq-redriven", one field per letter),
// kept so that kjobctl dlq redrive --all does not republish a letter twice
// and dlq list can show which letters were dealt with.
type Redrives struct {
	rdb redis.UniversalClient
	key string
}

// NewRedrives returns the redrive record of namespace.
func NewRedrives(rdb redis.UniversalClient, namespace string) (*Redrives, error) {
	if rdb == nil {
		return nil, &configerr.Error{Op: "operator: NewRedrives", Field: "Redis client", Reason: "is nil"}
	}
	if namespace == "" {
		return nil, &configerr.Error{Op: "operator: NewRedrives", Field: "namespace", Reason: `is empty; use the deployment's namespace, e.g. "kjob"`}
	}
	return &Redrives{rdb: rdb, key: names.Deployment{Namespace: namespace}.RedrivenKey()}, nil
}

// Begin records that r.Letter is being redriven. Without force it fails
// with ErrAlreadyRedriven (and returns the earlier redrive) if the letter
// was redriven before; with force it overwrites that record. Call Finish
// once the record is republished, or Delete if republishing failed.
func (s *Redrives) Begin(ctx context.Context, r Redrive, force bool) (Redrive, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return Redrive{}, err
	}
	if force {
		if err := s.rdb.HSet(ctx, s.key, field(r.Letter), b).Err(); err != nil {
			return Redrive{}, fmt.Errorf("operator: record redrive of %s: %w", field(r.Letter), err)
		}
		return r, nil
	}
	ok, err := s.rdb.HSetNX(ctx, s.key, field(r.Letter), b).Result()
	if err != nil {
		return Redrive{}, fmt.Errorf("operator: record redrive of %s: %w", field(r.Letter), err)
	}
	if !ok {
		cur, _, err := s.Get(ctx, r.Letter)
		if err != nil {
			return Redrive{}, err
		}
		return cur, fmt.Errorf("%w: %s at %s", ErrAlreadyRedriven, field(r.Letter), cur.At.UTC().Format(time.RFC3339))
	}
	return r, nil
}

// Finish stores r, which now names the republished record.
func (s *Redrives) Finish(ctx context.Context, r Redrive) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := s.rdb.HSet(ctx, s.key, field(r.Letter), b).Err(); err != nil {
		return fmt.Errorf("operator: record redrive of %s: %w", field(r.Letter), err)
	}
	return nil
}

// Delete forgets the redrives of letters (a redrive that failed, or
// letters no longer in the dead-letter topic).
func (s *Redrives) Delete(ctx context.Context, letters ...dlq.Origin) error {
	if len(letters) == 0 {
		return nil
	}
	fs := make([]string, len(letters))
	for i, l := range letters {
		fs[i] = field(l)
	}
	if err := s.rdb.HDel(ctx, s.key, fs...).Err(); err != nil {
		return fmt.Errorf("operator: delete redrive records: %w", err)
	}
	return nil
}

// Get returns the redrive of letter, and false if it was never redriven.
func (s *Redrives) Get(ctx context.Context, letter dlq.Origin) (Redrive, bool, error) {
	v, err := s.rdb.HGet(ctx, s.key, field(letter)).Result()
	if errors.Is(err, redis.Nil) {
		return Redrive{}, false, nil
	}
	if err != nil {
		return Redrive{}, false, fmt.Errorf("operator: get redrive of %s: %w", field(letter), err)
	}
	var r Redrive
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return Redrive{}, false, fmt.Errorf("operator: redrive of %s in %s is not valid: %w", field(letter), s.key, err)
	}
	return r, true, nil
}

// List returns every recorded redrive of letters of dlqTopic.
func (s *Redrives) List(ctx context.Context, dlqTopic string) (map[dlq.Origin]Redrive, error) {
	m, err := s.rdb.HGetAll(ctx, s.key).Result()
	if err != nil {
		return nil, fmt.Errorf("operator: list redrives: %w", err)
	}
	out := make(map[dlq.Origin]Redrive, len(m))
	for f, v := range m {
		l, ok := parseLetter(f)
		if !ok || l.Topic != dlqTopic {
			continue
		}
		var r Redrive
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return nil, fmt.Errorf("operator: redrive of %s in %s is not valid: %w", f, s.key, err)
		}
		out[l] = r
	}
	return out, nil
}
