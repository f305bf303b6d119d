package dedupe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The store epoch: how fencing tokens stay strictly increasing across a
// Redis that loses its data.
//
// The token counters live in the same Redis as the claims, so a Redis
// restarted without persistence starts every job's tokens at 1 again, and
// an AOF everysec crash or a failover to an asynchronous replica hands
// out the last few tokens a second time. The store epoch is a number kept
// outside Redis (in Kafka: internal/store/storeepoch), mirrored in Redis by an epoch
// marker. Every token is at least the epoch's floor, epoch << EpochShift:
// the claim scripts raise a job's counter to the floor before they take a
// token. So once a loss has been detected and the epoch bumped, every new
// token exceeds every token handed out in the earlier epochs, whatever the
// counters forgot.
//
// A Store without an epoch (SetEpoch never called) works as before: floor
// 0, no marker. Once SetEpoch has been called, the store claims only while
// its epoch is proven: Unprove (a suspected loss) makes every claim fail
// with ErrStoreUnproven, without calling Redis, until SetEpoch proves an
// epoch again. On a single server (where a script may read a key of any
// slot) every claim script also checks, atomically with the claim, that
// the marker still holds the proven epoch, so a store wiped between two
// checks refuses claims at once. On a Redis Cluster the marker lives in
// another slot than the jobs' keys: there the checks of internal/store/storeepoch are
// the only guard (see docs/guarantees.md).

// EpochShift is how far an epoch is shifted to make its token floor:
// every token of epoch e is above e << EpochShift. It leaves 2^32 tokens
// per job per epoch, and MaxEpoch epochs below 2^53 (Lua's numbers are
// doubles, which hold integers exactly up to 2^53).
const EpochShift = 32

// MaxEpoch is the highest store epoch: its floor, MaxEpoch << EpochShift,
// is below 2^53.
const MaxEpoch = 1<<(53-EpochShift) - 1

// EpochFloor returns the token floor of epoch: every token claimed in it
// is greater.
func EpochFloor(epoch int64) int64 { return epoch << EpochShift }

// ErrStoreUnproven is returned by the claims (Claim, ClaimBatch, and the
// chained claims of Settle leave their next window unclaimed) while the
// store epoch is not proven: the store may have lost data since the epoch
// was last proven, so a token taken now might not exceed earlier ones.
// The caller retries later, as for an unreachable Redis.
var ErrStoreUnproven = errors.New("dedupe: the store epoch is not proven (Redis may have lost data): claims are refused until it is")

// fence is a store's epoch state (Store.fence): nil for a store without
// an epoch.
type fence struct {
	proven bool
	epoch  int64
	floor  string // EpochFloor(epoch), decimal
	epochS string // epoch, decimal
}

// SetEpoch proves epoch: from now on every claim takes tokens above its
// floor (EpochFloor), and on a single server checks that the epoch marker
// still holds it. The caller (internal/store/storeepoch) has made sure the epoch is
// recorded outside Redis and in the marker. An epoch outside [0, MaxEpoch]
// is an error.
func (s *Store) SetEpoch(epoch int64) error {
	if epoch < 0 || epoch > MaxEpoch {
		return fmt.Errorf("dedupe: store epoch %d out of range [0, %d]", epoch, MaxEpoch)
	}
	e := strconv.FormatInt(epoch, 10)
	s.fence.Store(&fence{proven: true, epoch: epoch, floor: strconv.FormatInt(EpochFloor(epoch), 10), epochS: e})
	return nil
}

// Unprove makes every claim fail with ErrStoreUnproven until SetEpoch is
// called again: the store may have lost data. Completions and other
// settlements still run (their compare-and-set on the token needs no
// epoch).
func (s *Store) Unprove() {
	f := &fence{}
	if old := s.fence.Load(); old != nil {
		f.epoch, f.floor, f.epochS = old.epoch, old.floor, old.epochS
	}
	s.fence.Store(f)
}

// Epoch returns the proven epoch and whether the store claims (an epoch is
// proven, or the store has none: ok true, epoch 0).
func (s *Store) Epoch() (epoch int64, ok bool) {
	f := s.fence.Load()
	if f == nil {
		return 0, true
	}
	return f.epoch, f.proven
}

// fenceArgs returns the three fence arguments of a claiming script
// (fenceLua), or ErrStoreUnproven. markerOK tells whether the script may
// read the marker (a single server).
func (s *Store) fenceArgs(markerOK bool) ([3]any, error) {
	f := s.fence.Load()
	if f == nil {
		return [3]any{"0", "", ""}, nil
	}
	if !f.proven {
		return [3]any{}, ErrStoreUnproven
	}
	if !markerOK {
		return [3]any{f.floor, "", f.epochS}, nil
	}
	return [3]any{f.floor, s.markerKey, f.epochS}, nil
}

// fenceError returns ErrStoreUnproven, wrapped with the server's words,
// for a claim script's refusal (fenceRefusal), and err otherwise. A
// refusal unproves the store: its marker no longer holds the epoch.
func (s *Store) fenceError(err error) error {
	if err != nil && redis.HasErrorPrefix(err, "KJOBUNPROVEN") {
		s.Unprove()
		return fmt.Errorf("%w: %s", ErrStoreUnproven, strings.TrimPrefix(err.Error(), "KJOBUNPROVEN "))
	}
	return err
}

// Marker is the store's epoch marker in Redis: which epoch this Redis
// serves, who set it, and the run_id of the server that held it when it
// was set (Redis's INFO run_id changes with every restart and failover).
type Marker struct {
	// Epoch is the store epoch the marker holds.
	Epoch int64
	// ID is a random id of the marker's writer, for logs.
	ID string
	// RunID is the server's run_id when the marker was set: a server with
	// another run_id has restarted or failed over since, and may have lost
	// the last writes before that.
	RunID string
}

// markScript raises the epoch marker (KEYS[1], a hash) to epoch ARGV[1]
// with id ARGV[2] and run_id ARGV[3], if it is missing, holds a lower
// epoch, or holds the same epoch without a run_id; otherwise it leaves it
// alone. It returns the marker as it is afterwards: {epoch, id, run_id}.
// So among writers racing for one epoch the first wins, and the others
// see its marker.
var markScript = redis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'epoch', 'id', 'run_id')
local cur = tonumber(m[1])
local want = tonumber(ARGV[1])
if cur == nil or cur < want or (cur == want and (m[3] or '') == '' and ARGV[3] ~= '') then
  redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'id', ARGV[2], 'run_id', ARGV[3])
  return {ARGV[1], ARGV[2], ARGV[3]}
end
return {m[1], m[2] or '', m[3] or ''}
`)

// ReadMarker returns the store's epoch marker; ok is false when there is
// none (a new deployment, or a Redis that lost its data).
func (s *Store) ReadMarker(ctx context.Context) (m Marker, ok bool, err error) {
	v, err := s.rdb.HMGet(ctx, s.markerKey, "epoch", "id", "run_id").Result()
	if err != nil {
		return Marker{}, false, fmt.Errorf("read epoch marker: %w", err)
	}
	return parseMarker(v)
}

// Mark raises the epoch marker to epoch (see markScript), set by id on the
// server whose run_id is runID, and returns the marker as it is then:
// another writer's, if it got there first.
func (s *Store) Mark(ctx context.Context, epoch int64, id, runID string) (Marker, error) {
	v, err := markScript.Run(ctx, s.rdb, []string{s.markerKey}, epoch, id, runID).Slice()
	if err != nil {
		return Marker{}, fmt.Errorf("set epoch marker: %w", err)
	}
	m, ok, err := parseMarker(v)
	if err == nil && !ok {
		err = fmt.Errorf("set epoch marker: dedupe: unexpected reply %#v", v)
	}
	return m, err
}

// parseMarker decodes {epoch, id, run_id}.
func parseMarker(v []any) (Marker, bool, error) {
	if len(v) != 3 {
		return Marker{}, false, fmt.Errorf("epoch marker: dedupe: unexpected reply %#v", v)
	}
	e, _ := v[0].(string)
	if e == "" {
		return Marker{}, false, nil
	}
	n, err := strconv.ParseInt(e, 10, 64)
	if err != nil {
		return Marker{}, false, fmt.Errorf("epoch marker: epoch %q: %w", e, err)
	}
	id, _ := v[1].(string)
	run, _ := v[2].(string)
	return Marker{Epoch: n, ID: id, RunID: run}, true, nil
}

// RunID returns the Redis server's run_id (INFO server), which changes
// with every restart and failover. A server that does not tell it (a
// Redis user without +info, a proxy) gives "" and the error.
func (s *Store) RunID(ctx context.Context) (string, error) {
	if _, ok := s.rdb.(*redis.Client); !ok {
		// A Cluster or Ring client asks any of its nodes: no one run_id.
		return "", errors.New("redis run_id: not a single server (or Sentinel) client")
	}
	info, err := s.rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("redis INFO server: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v, nil
		}
	}
	return "", errors.New("redis INFO server: no run_id")
}
