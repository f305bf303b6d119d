// Package pause reads the Redis pause list of kjob before pauses moved
// into the spec (issue 23), so that the producer leader can migrate it.
//
// Pauses are now a state of a job's spec (specs.Record.Paused): versioned,
// in the change log, written only by the producer leader. Older versions
// of kjobctl and the dashboard kept paused jobs in a Redis hash
// "kjob:{<namespace>}:paused" (field = job, value = {"job", "since", "by"})
// that the producer read before each transaction. Nothing reads it for
// that any more: at the start of each term the leader lists it, commits
// each entry as a spec pause (source "migration", with the entry's by and
// since), and then deletes the entry (producer.Config.LegacyPauses). See
// docs/schedules.md, "Upgrading an existing deployment".
//
// The hash of finished pauses, "kjob:{<namespace>}:resumed", is no longer
// read or written: finished pauses are pause and resume records of the
// change log.
package pause

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/redis/go-redis/v9"
)

// Pause is one entry of the Redis pause list.
type Pause struct {
	// Job is the job name.
	Job string `json:"job"`
	// Since is when the job was paused (the operator's clock).
	Since time.Time `json:"since"`
	// By names who paused it.
	By string `json:"by,omitempty"`
}

// Store is the Redis pause list of one deployment (hash
// "kjob:{<namespace>}:paused", field = job). It implements
// producer.LegacyPauses.
type Store struct {
	rdb redis.UniversalClient
	key string
}

// New returns the pause list of namespace. A refused argument is a
// *configerr.Error.
func New(rdb redis.UniversalClient, namespace string) (*Store, error) {
	if rdb == nil {
		return nil, &configerr.Error{Op: "pause: New", Field: "Redis client", Reason: "is nil"}
	}
	if namespace == "" {
		return nil, &configerr.Error{Op: "pause: New", Field: "namespace", Reason: `is empty; use the deployment's namespace, e.g. "kjob"`}
	}
	return &Store{rdb: rdb, key: names.Deployment{Namespace: namespace}.PausedKey()}, nil
}

// Key is the hash the list lives in.
func (s *Store) Key() string { return s.key }

// List returns every entry, by job (HGETALL). An entry whose value does
// not decode is returned with only its Job set, so that it is still
// migrated (as a pause of unknown origin) rather than silently dropped.
func (s *Store) List(ctx context.Context) (map[string]Pause, error) {
	m, err := s.rdb.HGetAll(ctx, s.key).Result()
	if err != nil {
		return nil, fmt.Errorf("pause: read the pause list %s: %w", s.key, err)
	}
	out := make(map[string]Pause, len(m))
	for job, v := range m {
		var p Pause
		if json.Unmarshal([]byte(v), &p) != nil {
			p = Pause{}
		}
		p.Job = job
		out[job] = p
	}
	return out, nil
}

// Delete removes job's entry (HDEL); removing an absent entry is not an
// error.
func (s *Store) Delete(ctx context.Context, job string) error {
	if err := s.rdb.HDel(ctx, s.key, job).Err(); err != nil {
		return fmt.Errorf("pause: delete %s from the pause list %s: %w", job, s.key, err)
	}
	return nil
}

// Add writes an entry as kjobctl pause of an older version did (HSETNX):
// for tests of the migration and for the upgrade documentation's example.
func (s *Store) Add(ctx context.Context, p Pause) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := s.rdb.HSetNX(ctx, s.key, p.Job, b).Err(); err != nil {
		return fmt.Errorf("pause: add %s to the pause list %s: %w", p.Job, s.key, err)
	}
	return nil
}
