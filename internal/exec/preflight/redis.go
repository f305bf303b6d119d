package preflight

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/store/pause"
)

// The Redis commands each role's ACL user is granted in deploy/SECURITY.md
// (its ACL SETUSER lines). Tests check that the lists and the document
// agree, and that every command the Lua scripts of internal/store/lease (producer)
// and internal/store/dedupe (worker) call is listed. CheckRedisAccess probes them one
// by one to name the command a script was refused when Redis does not say
// (Redis 7.0).
//
// The worker's ZADD, ZREMRANGEBYRANK and ZREMRANGEBYSCORE record the run
// history (dedupe.Store.AppendRuns). The operator is kjobctl and the
// dashboard (kjob-operator): redrive records, backfill markers,
// the audit stream, window states, the run history and the producer lease.
var (
	RedisProducerCommands = []string{"ping", "hello", "eval", "evalsha", "get", "set", "incr", "del", "pexpire", "pttl", "time", "publish", "subscribe", "hgetall", "hdel"}
	RedisWorkerCommands   = []string{"ping", "hello", "eval", "evalsha", "hmget", "hset", "incrby", "pexpire", "del", "time", "zadd", "zremrangebyrank", "zremrangebyscore", "hkeys", "hdel", "info"}
	RedisOperatorCommands = []string{"hello", "eval", "evalsha", "time", "hmget", "del", "get", "set", "exists", "hget", "hsetnx", "hset", "hdel", "hgetall", "zrevrangebyscore", "xadd", "xrevrange"}
)

// ErrRedisPermission is wrapped by CheckRedisAccess's error when the Redis
// user lacks a command, key or channel permission its role needs.
var ErrRedisPermission = errors.New("redis: permission missing")

// RedisUse is one thing a role does in Redis, done once by
// CheckRedisAccess exactly as the role does it (the same scripts and
// commands), on throwaway keys or read-only.
type RedisUse struct {
	// What names the use in errors, e.g. "the claim script".
	What string
	// Run does it once; it returns the Redis error, or an error of its own
	// for an unexpected result.
	Run func(ctx context.Context) error
	// Degraded, if set, makes a refusal a warning instead of an error: the
	// role still works without this use, and Degraded says what is lost.
	Degraded string
}

// RedisRole is what one binary does in Redis, for CheckRedisAccess.
// Build it with ProducerRedisRole, WorkerRedisRole or OperatorRedisRole.
type RedisRole struct {
	// Name is the role in deploy/SECURITY.md: "producer", "worker" or
	// "operator".
	Name string
	// User is the ACL user the binary connects as, for messages.
	User string
	// Commands are the commands the role is granted in deploy/SECURITY.md.
	Commands []string
	// KeyPattern is the role's key pattern, for messages (e.g.
	// "~kjob:{prod}:*", names.Deployment.ProducerACLKeys).
	KeyPattern string
	// Uses are done in order.
	Uses []RedisUse

	rdb   redis.UniversalClient
	probe probeKeys
}

// probeKeys are what the single-command probes of missing work on: a key
// under the role's pattern that holds nothing (or nothing the probes
// change), a key that may be incremented, and a channel nobody listens on.
type probeKeys struct {
	key, counter, channel string
}

// AccessCheckJob is the job name of the worker check's throwaway windows:
// job names in schedules files are lower-case letters, digits and '-', so
// no real job can have it.
const AccessCheckJob = "_kjob_access_check"

// WorkerRedisRole returns the worker's Redis role: the idempotency scripts
// of internal/store/dedupe and the run history (AppendRuns: ZADD and its trims), each
// run on throwaway windows of a job no schedule can name (their records
// and the job's history expire within seconds; the job's token counter,
// one key, stays), plus PING (readiness) and EVAL (scripts are loaded with
// it when the server does not have them).
func WorkerRedisRole(rdb redis.UniversalClient, user, namespace, id string) (RedisRole, error) {
	d := names.Deployment{Namespace: namespace}
	st, err := dedupe.New(rdb, dedupe.Config{Namespace: namespace, ClaimTTL: time.Second, Retention: time.Second})
	if err != nil {
		return RedisRole{}, err
	}
	w := &workerRound{st: st, owner: id}
	return RedisRole{
		Name: "worker", User: user, Commands: RedisWorkerCommands, KeyPattern: d.WorkerACLKeys(),
		rdb: rdb, probe: probeKeys{key: d.JobKey(AccessCheckJob, "probe")},
		Uses: append(commonUses(rdb),
			RedisUse{What: "the claim script", Run: w.claim},
			RedisUse{What: "the server's run_id (INFO server), which the store epoch checks", Run: func(ctx context.Context) error {
				if _, single := rdb.(*redis.Client); !single {
					return nil // a cluster has no one run_id: not asked
				}
				if _, err := st.RunID(ctx); err != nil && isPermissionError(err) {
					return err
				}
				return nil // a server without run_id (a proxy, a fake): only wipes are detected
			}, Degraded: "a Redis restart or failover that loses its last writes does not bump the store epoch; only a wiped Redis is detected (docs/guarantees.md)"},
			RedisUse{What: "the extend script", Run: func(ctx context.Context) error {
				if err := w.batch(ctx, w.st.ExtendBatch, 0); err != nil {
					return err
				}
				return w.st.Extend(ctx, w.ids[3], w.tokens[3])
			}},
			RedisUse{What: "the complete script", Run: func(ctx context.Context) error {
				if err := w.batch(ctx, w.st.CompleteBatch, 0); err != nil {
					return err
				}
				return w.st.Complete(ctx, w.ids[3], w.tokens[3])
			}},
			RedisUse{What: "the release script", Run: func(ctx context.Context) error {
				return w.st.Release(ctx, w.ids[1], w.tokens[1], "kjob access check")
			}},
			RedisUse{What: "the dead-letter script", Run: func(ctx context.Context) error {
				return w.st.DeadLetter(ctx, w.ids[1], w.tokens[1], "kjob access check")
			}},
			RedisUse{What: "the unclaim script", Run: func(ctx context.Context) error {
				return w.batch(ctx, w.st.UnclaimBatch, 2)
			}},
			RedisUse{What: "the run history (ZADD, ZREMRANGEBYRANK, ZREMRANGEBYSCORE, PEXPIRE)", Run: func(ctx context.Context) error {
				// One run, so the append trims too, as a worker settling a
				// window at a time does.
				now := time.Now()
				return w.st.AppendRuns(ctx, []dedupe.Run{{WindowID: w.ids[3], Outcome: dedupe.RunDone, Started: now, Finished: now,
					Attempt: 1, Token: w.tokens[3], Worker: w.owner, Trigger: "manual"}})
			}},
			RedisUse{What: "the stall reports (HKEYS, HSET, HDEL)", Run: func(ctx context.Context) error {
				// A stall of a worker no one runs, reported then withdrawn.
				who := w.owner + "-" + AccessCheckJob
				now := time.Now()
				if err := w.st.ReportStalls(ctx, who, []dedupe.Stall{{Partition: 0, Offset: -1, Reason: "kjob access check", Since: now, Until: now.Add(time.Second)}}); err != nil {
					return err
				}
				return w.st.ReportStalls(ctx, who, nil)
			}},
		),
	}, nil
}

// workerRound is one round of the worker's check: four throwaway windows,
// claimed afresh by each round (a retried round never meets the claims of
// an earlier one), then completed (0 in a batch, 3 alone), released and
// dead-lettered (1), and unclaimed (2).
type workerRound struct {
	st     *dedupe.Store
	owner  string
	ids    [4]string
	tokens [4]int64
}

func (w *workerRound) claim(ctx context.Context) error {
	base := AccessCheckJob + "@" + w.owner + "-" + Nonce() + "-"
	for i := range w.ids {
		w.ids[i] = base + string(rune('a'+i))
	}
	cs, err := w.st.ClaimBatch(ctx, w.ids[:3], w.owner)
	if err != nil {
		return err
	}
	one, err := w.st.Claim(ctx, w.ids[3], w.owner)
	if err != nil {
		return err
	}
	for i, c := range append(cs, one) {
		if c.Outcome != dedupe.Claimed {
			return fmt.Errorf("throwaway window %s: %v, want Claimed", c.WindowID, c.Outcome)
		}
		w.tokens[i] = c.Token
	}
	return nil
}

// batch calls f (a *dedupe.Store batch method) for window i.
func (w *workerRound) batch(ctx context.Context, f func(context.Context, []string, []int64) ([]error, error), i int) error {
	errs, err := f(ctx, w.ids[i:i+1], w.tokens[i:i+1])
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// ProducerRedisRole returns the producer's Redis role: the pause list of
// older versions, which the leader migrates into the spec (HGETALL, and
// HDEL of the throwaway job's entry, which is absent: nothing changes)
// and, when leaseKey is set (the Redis lease backend),
// the lease scripts on a throwaway lease next to it (leaseKey +
// ":access-check", which stays with its epoch counter: two keys) and the
// release announcements on the real lease's channel (a message that is
// not a lease record, which electors ignore), plus PING (readiness) and
// EVAL (scripts are loaded with it when the server does not have them).
func ProducerRedisRole(rdb redis.UniversalClient, user, namespace, id, leaseKey string) (RedisRole, error) {
	d := names.Deployment{Namespace: namespace}
	pauses, err := pause.New(rdb, namespace)
	if err != nil {
		return RedisRole{}, err
	}
	role := RedisRole{
		Name: "producer", User: user, Commands: RedisProducerCommands, KeyPattern: d.ProducerACLKeys(),
		rdb: rdb, probe: probeKeys{key: d.Key("access-check:probe"), channel: d.Key("access-check")},
		Uses: append(commonUses(rdb), RedisUse{What: "the migration of the pause list of older versions (HGETALL, HDEL)", Run: func(ctx context.Context) error {
			if _, err := pauses.List(ctx); err != nil {
				return err
			}
			return pauses.Delete(ctx, AccessCheckJob)
		}}),
	}
	if leaseKey == "" {
		return role, nil
	}
	check, err := lease.NewRedisLock(rdb, leaseKey+":access-check")
	if err != nil {
		return RedisRole{}, err
	}
	live, err := lease.NewRedisLock(rdb, leaseKey)
	if err != nil {
		return RedisRole{}, err
	}
	role.probe.key, role.probe.counter = check.Key(), check.EpochKey()
	role.Uses = append(role.Uses,
		RedisUse{What: "the lease scripts (acquire, renew, release)", Run: func(ctx context.Context) error {
			return leaseRound(ctx, check, id)
		}},
		RedisUse{What: "the lease's remaining time (PTTL of " + live.Key() + ")",
			Degraded: "a standby replaces a crashed leader up to ProducerConfig.LeaseRenew after its lease expires instead of the moment it does (grant +pttl)",
			Run:      func(ctx context.Context) error { return rdb.PTTL(ctx, live.Key()).Err() }},
		RedisUse{What: "the lease release announcements (SUBSCRIBE and PUBLISH on " + live.Channel() + ")",
			Degraded: "standbys poll the lease every ProducerConfig.LeaseRenew instead of taking over the moment the leader releases it",
			Run: func(ctx context.Context) error {
				ps := rdb.Subscribe(ctx, live.Channel())
				defer ps.Close()
				if _, err := ps.Receive(ctx); err != nil {
					return err
				}
				return rdb.Publish(ctx, live.Channel(), "kjob access check: not a lease record").Err()
			}},
	)
	return role, nil
}

// leaseRound acquires, renews, reads and releases the throwaway lease l.
// Producers starting together share it, so it waits its turn.
func leaseRound(ctx context.Context, l *lease.RedisLock, id string) error {
	const ttl = 2 * time.Second
	deadline := time.Now().Add(2 * ttl)
	for {
		rec, ok, err := l.TryAcquire(ctx, id, ttl)
		if err != nil {
			return err
		}
		if ok {
			if err := l.Renew(ctx, rec, ttl); err != nil {
				return err
			}
			if _, err := l.Get(ctx); err != nil {
				return err
			}
			return l.Release(ctx, rec)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("throwaway lease %s stayed held by %s for %v", l.Key(), rec.Holder, 2*ttl)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // the holder releases within milliseconds
		}
	}
}

func commonUses(rdb redis.UniversalClient) []RedisUse {
	return []RedisUse{
		{What: "PING (readiness)", Run: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		EvalUse(rdb),
	}
}

// EvalUse is the use every role has: EVAL, with which go-redis loads a
// script Redis does not have yet.
func EvalUse(rdb redis.UniversalClient) RedisUse {
	return RedisUse{What: "EVAL (scripts are loaded with it when Redis lacks them)", Run: func(ctx context.Context) error {
		return rdb.Eval(ctx, "return 1", nil).Err()
	}}
}

// Nonce returns a random suffix for a check's throwaway keys and windows.
func Nonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CheckRedisAccess verifies, before a component starts, that its Redis
// user may do everything role does there: it does each of role.Uses once.
// A refusal stops it with an error wrapping ErrRedisPermission that names
// the missing command (or key pattern) and the use that needs it, and
// points at deploy/SECURITY.md; a refused Degraded use is logged instead.
// It retries while Redis cannot be reached or answers with another error,
// and returns nil when every use succeeded, or ctx.Err().
func CheckRedisAccess(ctx context.Context, log *slog.Logger, role RedisRole) error {
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		err := role.run(ctx, log)
		if err == nil || errors.Is(err, ErrRedisPermission) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isAuthError(err) {
			return fmt.Errorf("redis refused user %q: %w (check the Redis client's user and password)", role.User, err)
		}
		delay := b.Next()
		log.Warn("cannot check redis permissions yet; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// run does every use once.
func (r RedisRole) run(ctx context.Context, log *slog.Logger) error {
	for _, u := range r.Uses {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := u.Run(cctx)
		cancel()
		if err == nil {
			continue
		}
		if !isPermissionError(err) {
			return fmt.Errorf("redis access check, %s: %w", u.What, err)
		}
		missing := r.missing(ctx, err)
		if u.Degraded != "" {
			log.Warn("redis user lacks a permission; "+u.Degraded, "user", r.User, "missing", missing, "use", u.What, "err", err, "see", "deploy/SECURITY.md")
			continue
		}
		return fmt.Errorf("%w: user %q lacks %s, which the %s needs for %s: grant it as the %s's ACL SETUSER line in deploy/SECURITY.md does (%s skips this check): %v",
			ErrRedisPermission, r.User, missing, r.Name, u.What, r.Name, skipField(r.Name), err)
	}
	return nil
}

var (
	reCommand = regexp.MustCompile(`permissions to run the '([^']+)' command`)
	reKey     = regexp.MustCompile(`(?i)permissions to access (one of the keys|a key)|can't access at least one of the keys`)
	reChannel = regexp.MustCompile(`(?i)permissions to access (one of the channels|a channel)`)
)

// missing names what err was refused for: the command when Redis says
// (always outside scripts, and inside them from Redis 7.2 on), else the
// role's commands that a probe of each, outside scripts, finds refused.
func (r RedisRole) missing(ctx context.Context, err error) string {
	msg := err.Error()
	switch {
	case reCommand.MatchString(msg):
		return "+" + reCommand.FindStringSubmatch(msg)[1]
	case reKey.MatchString(msg):
		return "access to its keys (" + r.KeyPattern + ")"
	case reChannel.MatchString(msg):
		return "access to the channel (&...)"
	}
	// Redis 7.0 says only "The user executing the script can't run this
	// command or subcommand".
	var refused []string
	for _, c := range r.Commands {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		perr := r.probeCommand(cctx, c)
		cancel()
		if perr != nil && isPermissionError(perr) {
			if m := reCommand.FindStringSubmatch(perr.Error()); m != nil {
				refused = append(refused, "+"+m[1])
			}
		}
	}
	if len(refused) == 0 {
		return "a command a script calls (Redis 7.0 does not say which, and each of the role's documented commands is allowed: a script may call one deploy/SECURITY.md does not list)"
	}
	return strings.Join(refused, " ")
}

// probeCommand runs command c once so that the server checks the user's
// permission and, when granted, changes nothing: it reads, or its
// arguments fail only after the permission check (SET with PX 0, INCRBY,
// PEXPIRE, ZADD, ZREMRANGEBYRANK and ZREMRANGEBYSCORE with a non-number,
// HSET with an odd field count), or it
// increments a counter that may grow (INCR on the throwaway lease's epoch
// counter) or publishes where nobody listens.
func (r RedisRole) probeCommand(ctx context.Context, c string) error {
	key, ch := r.probe.key, r.probe.channel
	var err error
	switch c {
	case "ping":
		err = r.rdb.Ping(ctx).Err()
	case "hello":
		err = r.rdb.Do(ctx, "hello").Err()
	case "eval":
		err = r.rdb.Eval(ctx, "return 1", nil).Err()
	case "evalsha":
		err = r.rdb.EvalSha(ctx, strings.Repeat("0", 40), nil).Err()
	case "time":
		err = r.rdb.Time(ctx).Err()
	case "get":
		err = r.rdb.Get(ctx, key).Err()
	case "hmget":
		err = r.rdb.HMGet(ctx, key, "f").Err()
	case "hkeys":
		err = r.rdb.HKeys(ctx, key).Err()
	case "info":
		err = r.rdb.Info(ctx, "server").Err()
	case "hdel":
		err = r.rdb.HDel(ctx, key, "f").Err() // the probe key holds nothing
	case "del":
		err = r.rdb.Del(ctx, key).Err()
	case "set":
		err = r.rdb.Do(ctx, "set", key, "x", "px", "0").Err()
	case "hset":
		err = r.rdb.Do(ctx, "hset", key, "f", "v", "f2").Err()
	case "incrby":
		err = r.rdb.Do(ctx, "incrby", key, "x").Err()
	case "pexpire":
		err = r.rdb.Do(ctx, "pexpire", key, "x").Err()
	case "pttl":
		err = r.rdb.PTTL(ctx, key).Err()
	case "zadd":
		err = r.rdb.Do(ctx, "zadd", key, "x", "m").Err()
	case "zremrangebyrank":
		err = r.rdb.Do(ctx, "zremrangebyrank", key, "x", "y").Err()
	case "zremrangebyscore":
		err = r.rdb.Do(ctx, "zremrangebyscore", key, "x", "y").Err()
	case "incr":
		if r.probe.counter == "" {
			return nil // no counter that may grow: leave it to the scripts
		}
		err = r.rdb.Incr(ctx, r.probe.counter).Err()
	case "publish":
		err = r.rdb.Publish(ctx, ch, "kjob access check").Err()
	case "subscribe":
		ps := r.rdb.Subscribe(ctx, ch)
		_, err = ps.Receive(ctx)
		_ = ps.Close()
	}
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// isPermissionError reports whether err is an ACL refusal, outside a
// script (NOPERM) or inside one (Redis 7.0: "The user executing the script
// can't ..."; 7.2+: "ACL failure in script: ... no permissions to ...").
func isPermissionError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "NOPERM") || strings.Contains(msg, "The user executing the script can't") ||
		strings.Contains(msg, "ACL failure in script") || strings.Contains(strings.ToLower(msg), "no permissions to")
}

func isAuthError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH")
}

// NewRedisRole returns a role for CheckRedisAccess that is none of the
// binaries' own, such as the operator's (package operatorrole): its
// commands and key pattern as deploy/SECURITY.md grants them, probeKey a
// key under that pattern that holds nothing, and its uses.
func NewRedisRole(rdb redis.UniversalClient, name, user string, commands []string, keyPattern, probeKey string, uses []RedisUse) RedisRole {
	return RedisRole{Name: name, User: user, Commands: commands, KeyPattern: keyPattern, Uses: uses,
		rdb: rdb, probe: probeKeys{key: probeKey}}
}

// skipField names the setting that turns role's Redis access check off,
// for messages.
func skipField(role string) string {
	switch role {
	case "worker":
		return "WorkerConfig.SkipRedisAccessCheck"
	case "producer":
		return "ProducerConfig.SkipRedisAccessCheck"
	}
	return "the config's SkipRedisAccessCheck"
}
