package lease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/redis/go-redis/v9"
)

// The Lua scripts behind RedisLock. Conventions:
//
//   - KEYS[1] is the lease key; KEYS[2] (acquire only) the epoch counter,
//     KEYS[1] + ":epoch". Both share the caller's hash tag.
//   - The lease key's value is "<holder>|<epoch>|<acquired unix ms>". The
//     holder may itself contain '|': values are split at the last two.
//   - A tenure is identified by holder and epoch; renew and release compare
//     both, so a stale record of the same holder name matches nothing.

// acquireScript: ARGV[1] holder, ARGV[2] ttl ms, ARGV[3] epoch floor.
// Returns {1, value} when acquired, {0, current value} when held.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  -- How long the holder's lease has left, for a standby to try again the
  -- moment it expires; a user without +pttl (an ACL of before it) gets -1
  -- and its standby polls as before.
  local left = redis.pcall('PTTL', KEYS[1])
  if type(left) ~= 'number' then left = -1 end
  return {0, cur, left}
end
local epoch = redis.call('INCR', KEYS[2])
local floor = tonumber(ARGV[3])
if epoch <= floor then
  epoch = floor + 1
  redis.call('SET', KEYS[2], string.format('%d', epoch))
end
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = ARGV[1] .. '|' .. string.format('%d', epoch) .. '|' .. string.format('%d', ms)
redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
return {1, v}
`)

// luaSameTenure sets `same` to whether KEYS[1] holds the tenure
// ARGV[1] (holder), ARGV[2] (epoch).
const luaSameTenure = `
local cur = redis.call('GET', KEYS[1])
local same = false
if cur then
  local h, e = string.match(cur, '^(.*)|(%d+)|%d+$')
  same = (h == ARGV[1] and e == ARGV[2])
end
`

// renewScript: ARGV[1] holder, ARGV[2] epoch, ARGV[3] ttl ms. Returns 1 if
// extended, 0 if the tenure is not current.
var renewScript = redis.NewScript(luaSameTenure + `
if not same then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// releaseScript: ARGV[1] holder, ARGV[2] epoch, ARGV[3] the release
// channel. Returns 1 if deleted, 0 if the tenure was not current. A
// deletion is announced on the channel with the deleted value, in the same
// script, so standbys hear of it at once (RedisLock.WatchReleases). The
// announcement is best effort: redis.pcall keeps a refused PUBLISH (an ACL
// user without the channel) from failing the release.
var releaseScript = redis.NewScript(luaSameTenure + `
if not same then return 0 end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', ARGV[3], cur)
return 1
`)

// RedisLock implements Lock with one Redis key holding the current tenure
// and a counter key (the lease key + ":epoch") handing out epochs.
//
// Acquisition is one Lua script: if the lease key is free it increments the
// counter and SETs the key with PX ttl, so an epoch is consumed only by a
// successful acquisition and epochs of one lease key have no gaps while
// Redis keeps its data. If Redis loses its data (a restart without
// persistence, a failover that drops writes), the counter would restart
// from 1; to keep epochs growing anyway, each RedisLock remembers the
// highest epoch it has seen and acquisition never hands out an epoch at or
// below it. Epochs therefore keep growing across data loss as long as one
// replica that saw the old epochs is still running; they are an
// observability and fencing aid, not the basis of publishing safety.
//
// Renew and Release are compare-and-extend and compare-and-delete scripts:
// they act only if the key still holds the given record's holder and epoch.
//
// Release also PUBLISHes the released record on a channel (the lease key +
// ":released"), and WatchReleases SUBSCRIBEs to it, so an Elector on
// standby tries to acquire the lease the moment it is released (see
// Watcher). A Redis ACL user needs "&<key>:released" (or a pattern
// covering it) and +publish +subscribe for that; without them releases
// still work and standbys fall back to polling.
//
// Both keys must live in one Redis Cluster slot, so the key should carry a
// hash tag, e.g. "kjob:{<deployment>}:producer-lease" (the epoch key is then
// "kjob:{<deployment>}:producer-lease:epoch"). NewRedisLock rejects a key
// without one for a *redis.ClusterClient.
//
// go-redis ignores context deadlines for socket I/O unless the client is
// created with ContextTimeoutEnabled; the Elector never relies on a call
// returning on time, but its shutdown waits for calls in flight, so prefer
// ContextTimeoutEnabled: true or short Read/WriteTimeouts.
type RedisLock struct {
	client   redis.UniversalClient
	key      string
	epochKey string
	channel  string
	maxEpoch atomic.Int64 // highest epoch seen: the floor for new epochs
}

var (
	_ Lock    = (*RedisLock)(nil)
	_ Watcher = (*RedisLock)(nil)
)

// NewRedisLock returns a RedisLock on key (and key + ":epoch"). The client
// must be non-nil and the key non-empty; see RedisLock for the hash tag.
// A refused argument is a *configerr.Error.
func NewRedisLock(client redis.UniversalClient, key string) (*RedisLock, error) {
	if client == nil || isNilPointer(client) {
		return nil, &configerr.Error{Op: "lease: NewRedisLock", Field: "client", Reason: "is nil: pass a connected go-redis client"}
	}
	if key == "" {
		return nil, &configerr.Error{Op: "lease: NewRedisLock", Field: "key", Reason: `is empty: use a key with a hash tag, e.g. "kjob:{<deployment>}:producer-lease"`}
	}
	if _, ok := client.(*redis.ClusterClient); ok && !hasHashTag(key) {
		return nil, &configerr.Error{Op: "lease: NewRedisLock", Field: "key", Value: key,
			Reason: `has no hash tag: on Redis Cluster the lease and epoch keys must share a slot; use e.g. "kjob:{<deployment>}:producer-lease"`}
	}
	return &RedisLock{client: client, key: key, epochKey: key + ":epoch", channel: key + ":released"}, nil
}

// Key returns the lease key.
func (l *RedisLock) Key() string { return l.key }

// EpochKey returns the key of the epoch counter (Key() + ":epoch").
func (l *RedisLock) EpochKey() string { return l.epochKey }

// Channel returns the Pub/Sub channel on which releases are announced
// (Key() + ":released").
func (l *RedisLock) Channel() string { return l.channel }

// TryAcquire implements Lock.
func (l *RedisLock) TryAcquire(ctx context.Context, holder string, ttl time.Duration) (Record, bool, error) {
	if holder == "" {
		return Record{}, false, errors.New("lease: TryAcquire: holder is empty")
	}
	ms, err := ttlMillis(ttl)
	if err != nil {
		return Record{}, false, err
	}
	res, err := acquireScript.Run(ctx, l.client, []string{l.key, l.epochKey}, holder, ms, l.maxEpoch.Load()).Slice()
	if err != nil {
		return Record{}, false, fmt.Errorf("lease: acquire %s: %w", l.key, err)
	}
	if len(res) < 2 {
		return Record{}, false, fmt.Errorf("lease: acquire %s: unexpected script reply %v", l.key, res)
	}
	ok, _ := res[0].(int64)
	val, _ := res[1].(string)
	rec, err := l.parse(val)
	if err != nil {
		return Record{}, false, err
	}
	if len(res) > 2 {
		if ms, _ := res[2].(int64); ms > 0 { // PTTL: -1 no expiry, -2 gone
			rec.Remaining = time.Duration(ms) * time.Millisecond
		}
	}
	return rec, ok == 1, nil
}

// Renew implements Lock.
func (l *RedisLock) Renew(ctx context.Context, rec Record, ttl time.Duration) error {
	ms, err := ttlMillis(ttl)
	if err != nil {
		return err
	}
	l.see(rec.Epoch)
	n, err := renewScript.Run(ctx, l.client, []string{l.key}, rec.Holder, strconv.FormatInt(rec.Epoch, 10), ms).Int()
	if err != nil {
		return fmt.Errorf("lease: renew %s: %w", l.key, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: %s (epoch %d) no longer holds %s", ErrLost, rec.Holder, rec.Epoch, l.key)
	}
	return nil
}

// Release implements Lock.
func (l *RedisLock) Release(ctx context.Context, rec Record) error {
	l.see(rec.Epoch)
	if err := releaseScript.Run(ctx, l.client, []string{l.key}, rec.Holder, strconv.FormatInt(rec.Epoch, 10), l.channel).Err(); err != nil {
		return fmt.Errorf("lease: release %s: %w", l.key, err)
	}
	return nil
}

// Get implements Lock.
func (l *RedisLock) Get(ctx context.Context) (Record, error) {
	val, err := l.client.Get(ctx, l.key).Result()
	if errors.Is(err, redis.Nil) {
		return Record{}, ErrNoHolder
	}
	if err != nil {
		return Record{}, fmt.Errorf("lease: get %s: %w", l.key, err)
	}
	return l.parse(val)
}

// watchPing is how long WatchReleases waits for a message before it pings
// the server to check that the subscription's connection is alive; a
// connection that answers neither within another watchPing is dropped.
const watchPing = 15 * time.Second

// WatchReleases implements Watcher: it SUBSCRIBEs to Channel() on a
// connection of its own and calls released with each release announced
// there, until ctx is done (it then returns ctx.Err()) or the subscription
// fails or its connection breaks (it returns that error).
func (l *RedisLock) WatchReleases(ctx context.Context, released func(Record)) error {
	ps := l.client.Subscribe(ctx, l.channel)
	// Reads ignore ctx unless the client has ContextTimeoutEnabled: closing
	// the subscription is what unblocks them on cancellation.
	quit, closed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(closed)
		select {
		case <-ctx.Done():
		case <-quit:
		}
		_ = ps.Close()
	}()
	defer func() { close(quit); <-closed }()

	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, watchPing)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ne net.Error
		switch {
		case err != nil && errors.As(err, &ne) && ne.Timeout() && !pinged:
			pinged = true
			if err := ps.Ping(ctx); err != nil {
				return fmt.Errorf("lease: watch %s: ping: %w", l.channel, err)
			}
			continue
		case err != nil:
			return fmt.Errorf("lease: watch %s: %w", l.channel, err)
		}
		pinged = false
		m, ok := msg.(*redis.Message)
		if !ok || m.Channel != l.channel {
			continue // *redis.Subscription, *redis.Pong
		}
		if rec, ok := decode(m.Payload); ok {
			l.see(rec.Epoch)
			released(rec)
		}
	}
}

// parse decodes "<holder>|<epoch>|<ms>" and remembers the epoch.
func (l *RedisLock) parse(val string) (Record, error) {
	rec, ok := decode(val)
	if !ok {
		return Record{}, fmt.Errorf("lease: key %s holds %q, which is not a lease record (<holder>|<epoch>|<unix ms>): is another program using it?", l.key, val)
	}
	l.see(rec.Epoch)
	return rec, nil
}

// see raises the epoch floor to epoch.
func (l *RedisLock) see(epoch int64) {
	for {
		cur := l.maxEpoch.Load()
		if epoch <= cur || l.maxEpoch.CompareAndSwap(cur, epoch) {
			return
		}
	}
}

func decode(val string) (Record, bool) {
	i := strings.LastIndexByte(val, '|')
	if i < 0 {
		return Record{}, false
	}
	j := strings.LastIndexByte(val[:i], '|')
	if j <= 0 {
		return Record{}, false
	}
	epoch, err1 := strconv.ParseInt(val[j+1:i], 10, 64)
	ms, err2 := strconv.ParseInt(val[i+1:], 10, 64)
	if err1 != nil || err2 != nil || epoch <= 0 {
		return Record{}, false
	}
	return Record{Holder: val[:j], Epoch: epoch, Acquired: time.UnixMilli(ms)}, true
}

// ttlMillis converts ttl to whole milliseconds, rounding up: the key must
// not expire before the caller thinks it does.
func ttlMillis(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("lease: ttl %v is below Redis's 1ms resolution", ttl)
	}
	return int64((ttl + time.Millisecond - 1) / time.Millisecond), nil
}

// hasHashTag reports whether key has a non-empty {hash tag}, so that key
// and key + ":epoch" hash to the same Redis Cluster slot.
func hasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(key[i+1:], '}')
	return j > 0
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
