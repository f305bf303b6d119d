// Package operatorrole is the Redis role of kjobctl and the dashboard, for
// tests: kjobctl has no start-up check, and keeping the role here keeps
// the operator's code (internal/ops/operator) out of the worker and producer, which
// link package preflight.
package operatorrole

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/dlq"
	"github.com/kjob/kjob/internal/store/lease"
)

// RedisRole returns the Redis role of kjobctl and the dashboard
// (the kjob-operator user of deploy/SECURITY.md): the dead-letter redrive records, the
// backfill markers, the audit stream (XADD, XREVRANGE), window states (the
// state script) and Forget, the run history (ZREVRANGEBYSCORE) and the
// producer lease at leaseKey (GET, read-only), plus EVAL (scripts are
// loaded with it when the server does not have them). Redrive records and
// markers are of the job _kjob_access_check, which no schedule can name,
// and are removed again; the audit stream gets one record saying it was a
// check. Pauses are not in Redis: they are spec changes through the
// producer leader (Kafka ACLs). kjobctl has no
// start-up check: the tests run this role against the documented user.
func RedisRole(rdb redis.UniversalClient, user, namespace, id, leaseKey string) (preflight.RedisRole, error) {
	d := names.Deployment{Namespace: namespace}
	st, err := dedupe.New(rdb, dedupe.Config{Namespace: namespace})
	if err != nil {
		return preflight.RedisRole{}, err
	}
	redrives, err := operator.NewRedrives(rdb, namespace)
	if err != nil {
		return preflight.RedisRole{}, err
	}
	published, err := operator.NewPublished(rdb, namespace, time.Second)
	if err != nil {
		return preflight.RedisRole{}, err
	}
	audit, err := operator.NewAuditLog(rdb, namespace, 0)
	if err != nil {
		return preflight.RedisRole{}, err
	}
	live, err := lease.NewRedisLock(rdb, leaseKey)
	if err != nil {
		return preflight.RedisRole{}, err
	}
	window := func() string { return preflight.AccessCheckJob + "@" + id + "-" + preflight.Nonce() }
	letter := dlq.Origin{Topic: preflight.AccessCheckJob, Partition: 0, Offset: 0}
	return preflight.NewRedisRole(rdb, "operator", user, preflight.RedisOperatorCommands, d.OperatorACLKeys(), d.Key("access-check:probe"),
		[]preflight.RedisUse{
			preflight.EvalUse(rdb), // kjobctl does not PING
			{What: "the window states (the state script) and Forget (DEL)", Run: func(ctx context.Context) error {
				id := window()
				if _, err := st.State(ctx, id); !errors.Is(err, dedupe.ErrNotFound) {
					return err
				}
				return st.Forget(ctx, id)
			}},
			{What: "the producer lease (GET)", Run: func(ctx context.Context) error {
				if _, err := live.Get(ctx); err != nil && !errors.Is(err, lease.ErrNoHolder) {
					return err
				}
				return nil
			}},
			{What: "the redrive records (HSETNX, HSET, HGET, HGETALL, HDEL)", Run: func(ctx context.Context) error {
				rec := operator.Redrive{Letter: letter, At: time.Now().UTC(), By: "kjob access check " + id}
				r, err := redrives.Begin(ctx, rec, false)
				if errors.Is(err, operator.ErrAlreadyRedriven) { // left by a check that stopped halfway
					r, err = redrives.Begin(ctx, rec, true)
				}
				if err != nil {
					return err
				}
				if err := redrives.Finish(ctx, r); err != nil {
					return err
				}
				if _, _, err := redrives.Get(ctx, letter); err != nil {
					return err
				}
				if _, err := redrives.List(ctx, preflight.AccessCheckJob); err != nil {
					return err
				}
				return redrives.Delete(ctx, letter)
			}},
			{What: "the backfill markers (SET, EXISTS, DEL)", Run: func(ctx context.Context) error {
				ids := []string{window()}
				if _, err := published.Reserve(ctx, ids, time.Second); err != nil {
					return err
				}
				if err := published.Confirm(ctx, ids); err != nil {
					return err
				}
				if _, err := published.Marked(ctx, ids); err != nil {
					return err
				}
				return published.Release(ctx, ids)
			}},
			{What: "the run history (ZREVRANGEBYSCORE)", Run: func(ctx context.Context) error {
				_, err := st.Runs(ctx, preflight.AccessCheckJob, dedupe.RunQuery{Limit: 1})
				return err
			}},
			{What: "the audit log (XADD, XREVRANGE)", Run: func(ctx context.Context) error {
				err := audit.Append(ctx, operator.AuditRecord{At: time.Now().UTC(), Who: id, Tool: "kjob access check", Action: "access-check",
					Target: audit.Key(), Outcome: "ok", Detail: "a check of the Redis user's permissions; nothing was done", Request: preflight.Nonce()})
				if err != nil {
					return err
				}
				_, err = audit.Recent(ctx, 1)
				return err
			}},
		}), nil
}
