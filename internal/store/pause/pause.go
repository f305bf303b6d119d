// Package pause keeps the jobs an operator paused, in Redis, where the
// producer reads them and operators' tools (kjobctl pause and resume, the
// dashboard) write them.
//
// A paused job's windows are not published: the producer asks the Store
// before each transaction (producer.Config.Pauses) and advances a paused
// job's state without publishing its windows, so neither it nor a later
// leader publishes them, and the pause survives leader changes. The Store
// also keeps each job's last finished pause, so a resume with catch-up
// (kjobctl resume --catchup) can republish the skipped windows under their
// scheduled ids, and status pages can tell a skipped window from a lost one.
//
// Keys (see names.Deployment): one hash of paused jobs per deployment,
// "kjob:{<namespace>}:paused", field = job, and one of finished pauses,
// "kjob:{<namespace>}:resumed".
package pause

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/redis/go-redis/v9"
)

// ErrNotPaused is returned by Resume for a job that is not paused.
var ErrNotPaused = errors.New("pause: job is not paused")

// ErrAlreadyPaused is returned by Pause for a job that is paused already.
var ErrAlreadyPaused = errors.New("pause: job is already paused")

// Pause describes one paused job.
type Pause struct {
	// Job is the job name.
	Job string `json:"job"`
	// Since is when the job was paused (the operator's clock).
	Since time.Time `json:"since"`
	// By names who paused it.
	By string `json:"by,omitempty"`
}

// Store is the set of paused jobs of one deployment, in Redis (hash
// "kjob:{<namespace>}:paused", field = job), and the last finished pause
// of each job (hash "kjob:{<namespace>}:resumed"). It implements
// producer.Pauses and inspect.PauseHistory.
type Store struct {
	rdb     redis.UniversalClient
	key     string
	resumed string
}

// Resumed is a finished pause: the job's windows that fell due in [Since,
// ResumedAt) were skipped by the producer (unless caught up).
type Resumed struct {
	Pause
	// ResumedAt is when the job was resumed (the operator's clock).
	ResumedAt time.Time `json:"resumed_at"`
}

// New returns the pause set of namespace. A refused argument is a
// *configerr.Error.
func New(rdb redis.UniversalClient, namespace string) (*Store, error) {
	if rdb == nil {
		return nil, &configerr.Error{Op: "pause: New", Field: "Redis client", Reason: "is nil"}
	}
	if namespace == "" {
		return nil, &configerr.Error{Op: "pause: New", Field: "namespace", Reason: `is empty; use the deployment's namespace, e.g. "kjob"`}
	}
	d := names.Deployment{Namespace: namespace}
	return &Store{rdb: rdb, key: d.PausedKey(), resumed: d.ResumedKey()}, nil
}

// Pause pauses job. It returns ErrAlreadyPaused (with the existing pause)
// if it is paused already.
func (s *Store) Pause(ctx context.Context, p Pause) (Pause, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return Pause{}, err
	}
	ok, err := s.rdb.HSetNX(ctx, s.key, p.Job, b).Result()
	if err != nil {
		return Pause{}, fmt.Errorf("pause: pause %s: %w", p.Job, err)
	}
	if !ok {
		cur, _, err := s.Get(ctx, p.Job)
		if err != nil {
			return Pause{}, err
		}
		return cur, fmt.Errorf("%w: %s since %s", ErrAlreadyPaused, p.Job, cur.Since.UTC().Format(time.RFC3339))
	}
	return p, nil
}

// Get returns job's pause, and false if it is not paused.
func (s *Store) Get(ctx context.Context, job string) (Pause, bool, error) {
	v, err := s.rdb.HGet(ctx, s.key, job).Result()
	if errors.Is(err, redis.Nil) {
		return Pause{}, false, nil
	}
	if err != nil {
		return Pause{}, false, fmt.Errorf("pause: get pause of %s: %w", job, err)
	}
	var p Pause
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return Pause{}, false, fmt.Errorf("pause: pause of %s in %s is not valid: %w", job, s.key, err)
	}
	return p, true, nil
}

// Resume removes job's pause and returns it; ErrNotPaused if there was none.
// It records the finished pause, ending now, for LastResumed.
func (s *Store) Resume(ctx context.Context, job string) (Pause, error) {
	return s.ResumeAt(ctx, job, time.Now())
}

// ResumeAt is Resume with the end of the pause given (the operator's clock).
func (s *Store) ResumeAt(ctx context.Context, job string, at time.Time) (Pause, error) {
	p, ok, err := s.Get(ctx, job)
	if err != nil {
		return Pause{}, err
	}
	if !ok {
		return Pause{}, fmt.Errorf("%w: %s", ErrNotPaused, job)
	}
	b, err := json.Marshal(Resumed{Pause: p, ResumedAt: at.UTC()})
	if err != nil {
		return Pause{}, err
	}
	cmds, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HDel(ctx, s.key, job)
		pipe.HSet(ctx, s.resumed, job, b)
		return nil
	})
	if err != nil {
		// A command refused while queued (an ACL user without +hdel or
		// +hset) makes EXEC fail with EXECABORT, which does not say why:
		// the refused command's own error does.
		for _, c := range cmds {
			if cerr := c.Err(); cerr != nil && !strings.HasPrefix(cerr.Error(), "EXECABORT") {
				return Pause{}, fmt.Errorf("pause: resume %s: %s: %w", job, c.Name(), cerr)
			}
		}
		return Pause{}, fmt.Errorf("pause: resume %s: %w", job, err)
	}
	return p, nil
}

// LastResumed returns each job's last finished pause.
func (s *Store) LastResumed(ctx context.Context) (map[string]Resumed, error) {
	m, err := s.rdb.HGetAll(ctx, s.resumed).Result()
	if err != nil {
		return nil, fmt.Errorf("pause: finished pauses: %w", err)
	}
	out := make(map[string]Resumed, len(m))
	for job, v := range m {
		var r Resumed
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return nil, fmt.Errorf("pause: finished pause of %s in %s is not valid: %w", job, s.resumed, err)
		}
		out[job] = r
	}
	return out, nil
}

// Period is a finished pause: the job's windows starting in [Since,
// Until) were skipped by the producer.
type Period struct {
	Since, Until time.Time
}

// PausePeriods implements inspect.PauseHistory: each job's last finished
// pause as [since, resumed at).
func (s *Store) PausePeriods(ctx context.Context) (map[string]Period, error) {
	m, err := s.LastResumed(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Period, len(m))
	for job, r := range m {
		out[job] = Period{Since: r.Since, Until: r.ResumedAt}
	}
	return out, nil
}

// List returns every pause, by job.
func (s *Store) List(ctx context.Context) (map[string]Pause, error) {
	m, err := s.rdb.HGetAll(ctx, s.key).Result()
	if err != nil {
		return nil, fmt.Errorf("pause: list pauses: %w", err)
	}
	out := make(map[string]Pause, len(m))
	for job, v := range m {
		var p Pause
		if err := json.Unmarshal([]byte(v), &p); err != nil {
			return nil, fmt.Errorf("pause: pause of %s in %s is not valid: %w", job, s.key, err)
		}
		out[job] = p
	}
	return out, nil
}

// Paused implements producer.Pauses.
func (s *Store) Paused(ctx context.Context) (map[string]bool, error) {
	keys, err := s.rdb.HKeys(ctx, s.key).Result()
	if err != nil {
		return nil, fmt.Errorf("pause: paused jobs: %w", err)
	}
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m, nil
}
