package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

const testKey = "kjob:{test}:producer-lease"

func newLock(t *testing.T) (*lease.RedisLock, *redis.Client) {
	t.Helper()
	rc := testenv.NewRedis(t).Client()
	l, err := lease.NewRedisLock(rc, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return l, rc
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, l lease.Lock, holder string, ttl time.Duration) lease.Record {
	t.Helper()
	rec, ok, err := l.TryAcquire(ctxT(t), holder, ttl)
	if err != nil || !ok {
		t.Fatalf("TryAcquire(%q) = %+v, %v, %v; want acquired", holder, rec, ok, err)
	}
	if rec.Holder != holder || rec.Epoch <= 0 {
		t.Fatalf("TryAcquire(%q) record = %+v", holder, rec)
	}
	return rec
}

func TestRedisLockAcquireRenewRelease(t *testing.T) {
	l, rc := newLock(t)
	ctx := ctxT(t)

	if _, err := l.Get(ctx); !errors.Is(err, lease.ErrNoHolder) {
		t.Fatalf("Get on a free lease = %v, want ErrNoHolder", err)
	}
	before := time.Now()
	a := mustAcquire(t, l, "a", time.Second)
	if a.Epoch != 1 {
		t.Errorf("first epoch = %d, want 1", a.Epoch)
	}
	if d := a.Acquired.Sub(before); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("Acquired = %v, far from now (%v)", a.Acquired, before)
	}
	if v := rc.Get(ctx, testKey).Val(); !strings.HasPrefix(v, "a|1|") {
		t.Errorf("stored value = %q, want a|1|<ms>", v)
	}

	// Someone else cannot take it, and is told who holds it.
	cur, ok, err := l.TryAcquire(ctx, "b", time.Second)
	if err != nil || ok || cur.Holder != "a" || cur.Epoch != 1 {
		t.Fatalf("TryAcquire(b) while held = %+v, %v, %v; want a's record, false", cur, ok, err)
	}
	// It is also told how long a's lease has left, by Redis's clock.
	if cur.Remaining <= 0 || cur.Remaining > time.Minute {
		t.Errorf("TryAcquire(b) while held: Remaining = %v, want in (0, 1m] (a's TTL)", cur.Remaining)
	}
	// Nor can the holder itself start a second tenure.
	if _, ok, err := l.TryAcquire(ctx, "a", time.Second); err != nil || ok {
		t.Fatalf("TryAcquire(a) while a holds = %v, %v; want false", ok, err)
	}
	got, err := l.Get(ctx)
	if err != nil || got.Holder != "a" || got.Epoch != 1 || !got.Acquired.Equal(a.Acquired) {
		t.Fatalf("Get = %+v, %v; want %+v", got, err, a)
	}

	// Renew extends the TTL.
	if err := l.Renew(ctx, a, 30*time.Second); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if pttl := rc.PTTL(ctx, testKey).Val(); pttl < 10*time.Second {
		t.Fatalf("PTTL after Renew(30s) = %v", pttl)
	}

	// Release frees it; releasing again is not an error.
	if err := l.Release(ctx, a); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := l.Get(ctx); !errors.Is(err, lease.ErrNoHolder) {
		t.Fatalf("Get after Release = %v, want ErrNoHolder", err)
	}
	if err := l.Release(ctx, a); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if err := l.Renew(ctx, a, time.Second); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after Release = %v, want ErrLost", err)
	}
	b := mustAcquire(t, l, "b", time.Second)
	if b.Epoch != 2 {
		t.Errorf("second epoch = %d, want 2", b.Epoch)
	}
}

func TestRedisLockExpires(t *testing.T) {
	l, rc := newLock(t)
	ctx := ctxT(t)
	a := mustAcquire(t, l, "a", 100*time.Millisecond)
	if pttl := rc.PTTL(ctx, testKey).Val(); pttl <= 0 || pttl > 100*time.Millisecond {
		t.Fatalf("PTTL = %v, want (0, 100ms]", pttl)
	}
	testenv.Eventually(t, 5*time.Second, func() bool {
		_, err := l.Get(ctx)
		return errors.Is(err, lease.ErrNoHolder)
	}, "lease with 100ms TTL did not expire")
	if err := l.Renew(ctx, a, time.Second); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew of expired lease = %v, want ErrLost", err)
	}
	mustAcquire(t, l, "b", time.Second)
}

// A stale record, even of the same holder name, neither extends nor
// deletes the current tenure.
func TestRedisLockCompareRefusesStaleRecord(t *testing.T) {
	l, rc := newLock(t)
	ctx := ctxT(t)
	a1 := mustAcquire(t, l, "a", time.Second)
	if err := l.Release(ctx, a1); err != nil {
		t.Fatal(err)
	}
	a2 := mustAcquire(t, l, "a", time.Second) // same holder, new tenure

	for _, stale := range []lease.Record{
		a1,                               // same holder, old epoch
		{Holder: "b", Epoch: a2.Epoch},   // right epoch, wrong holder
		{Holder: "", Epoch: a2.Epoch},    // empty holder
		{Holder: "a|2", Epoch: a2.Epoch}, // holder that is a prefix trick
	} {
		if err := l.Renew(ctx, stale, 30*time.Second); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Renew(%+v) = %v, want ErrLost", stale, err)
		}
		if err := l.Release(ctx, stale); err != nil {
			t.Errorf("Release(%+v) = %v, want nil", stale, err)
		}
	}
	if pttl := rc.PTTL(ctx, testKey).Val(); pttl > time.Second {
		t.Errorf("a stale Renew extended the lease: PTTL = %v", pttl)
	}
	got, err := l.Get(ctx)
	if err != nil || got.Holder != "a" || got.Epoch != a2.Epoch {
		t.Fatalf("after stale Release: Get = %+v, %v; want a epoch %d", got, err, a2.Epoch)
	}

	// Another replica's lease survives a's stale release too.
	if err := l.Release(ctx, a2); err != nil {
		t.Fatal(err)
	}
	b := mustAcquire(t, l, "b", time.Second)
	if err := l.Release(ctx, a2); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Get(ctx); err != nil || got.Holder != "b" || got.Epoch != b.Epoch {
		t.Fatalf("a's Release deleted b's lease: Get = %+v, %v", got, err)
	}
	if err := l.Renew(ctx, b, time.Second); err != nil {
		t.Fatalf("b's Renew: %v", err)
	}
}

// Epochs grow by one per acquisition: failed attempts consume none.
func TestRedisLockEpochsIncreaseWithoutGaps(t *testing.T) {
	l, _ := newLock(t)
	ctx := ctxT(t)
	holders := []string{"a", "b", "c"}
	var last int64
	for i := range 6 {
		h := holders[i%len(holders)]
		rec := mustAcquire(t, l, h, time.Second)
		if rec.Epoch != last+1 {
			t.Fatalf("acquisition %d: epoch %d, want %d", i, rec.Epoch, last+1)
		}
		last = rec.Epoch
		for _, other := range holders {
			if _, ok, err := l.TryAcquire(ctx, other, time.Second); ok || err != nil {
				t.Fatalf("TryAcquire(%s) while %s holds: %v, %v", other, h, ok, err)
			}
		}
		if err := l.Release(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
}

// When Redis loses its data the epoch counter restarts, but a RedisLock
// that saw higher epochs never hands out a lower one.
func TestRedisLockEpochsSurviveDataLoss(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	l1, _ := lease.NewRedisLock(r.Client(), testKey)
	l2, _ := lease.NewRedisLock(r.Client(), testKey)
	var a lease.Record
	for range 3 {
		a = mustAcquire(t, l1, "a", time.Second)
		if err := l1.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	b := mustAcquire(t, l2, "b", time.Second)
	if b.Epoch != a.Epoch+1 {
		t.Fatalf("epoch %d after %d", b.Epoch, a.Epoch)
	}
	// l1 campaigns while b leads, and so sees b's epoch.
	if cur, ok, err := l1.TryAcquire(ctx, "a", time.Second); ok || err != nil || cur.Epoch != b.Epoch {
		t.Fatalf("TryAcquire while b holds = %+v, %v, %v", cur, ok, err)
	}

	if err := r.Client().FlushAll(ctx).Err(); err != nil { // data loss
		t.Fatal(err)
	}
	a2 := mustAcquire(t, l1, "a", time.Second)
	if a2.Epoch != b.Epoch+1 {
		t.Fatalf("after data loss l1 handed out epoch %d, want %d (one above the highest it saw)", a2.Epoch, b.Epoch+1)
	}
	if err := r.Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	b2 := mustAcquire(t, l2, "b", time.Second)
	if b2.Epoch <= b.Epoch {
		t.Fatalf("after data loss l2 handed out epoch %d, want > %d", b2.Epoch, b.Epoch)
	}
	// A RedisLock created after the loss that saw nothing starts over:
	// the documented limit.
	if err := r.Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	l3, _ := lease.NewRedisLock(r.Client(), testKey)
	if c := mustAcquire(t, l3, "c", time.Second); c.Epoch != 1 {
		t.Fatalf("fresh lock after data loss: epoch %d, want 1", c.Epoch)
	}
}

func TestRedisLockHolderContainingSeparator(t *testing.T) {
	l, _ := newLock(t)
	ctx := ctxT(t)
	rec := mustAcquire(t, l, "pod|7|x", time.Second)
	got, err := l.Get(ctx)
	if err != nil || got.Holder != "pod|7|x" || got.Epoch != rec.Epoch {
		t.Fatalf("Get = %+v, %v; want holder %q epoch %d", got, err, "pod|7|x", rec.Epoch)
	}
	if err := l.Renew(ctx, rec, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(ctx); !errors.Is(err, lease.ErrNoHolder) {
		t.Fatalf("Get after Release = %v", err)
	}
}

func TestRedisLockForeignValue(t *testing.T) {
	l, rc := newLock(t)
	ctx := ctxT(t)
	rc.Set(ctx, testKey, "not-a-lease", time.Minute)
	want := `lease: key kjob:{test}:producer-lease holds "not-a-lease", which is not a lease record (<holder>|<epoch>|<unix ms>): is another program using it?`
	if _, err := l.Get(ctx); err == nil || err.Error() != want {
		t.Errorf("Get = %v, want %s", err, want)
	}
	if _, ok, err := l.TryAcquire(ctx, "a", time.Second); ok || err == nil || err.Error() != want {
		t.Errorf("TryAcquire = %v, %v; want false, %s", ok, err, want)
	}
	if err := l.Renew(ctx, lease.Record{Holder: "a", Epoch: 1}, time.Second); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew = %v, want ErrLost", err)
	}
	if v := rc.Get(ctx, testKey).Val(); v != "not-a-lease" {
		t.Errorf("foreign value overwritten: %q", v)
	}
}

func TestRedisLockBadArguments(t *testing.T) {
	l, _ := newLock(t)
	ctx := ctxT(t)
	if _, _, err := l.TryAcquire(ctx, "", time.Second); err == nil || err.Error() != "lease: TryAcquire: holder is empty" {
		t.Errorf("TryAcquire empty holder: %v", err)
	}
	if _, _, err := l.TryAcquire(ctx, "a", time.Microsecond); err == nil || err.Error() != "lease: ttl 1µs is below Redis's 1ms resolution" {
		t.Errorf("TryAcquire 1µs: %v", err)
	}
	if err := l.Renew(ctx, lease.Record{Holder: "a", Epoch: 1}, 0); err == nil {
		t.Errorf("Renew with ttl 0: no error")
	}
}

func TestNewRedisLockValidation(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rc.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	var nilClient *redis.Client
	for _, tc := range []struct {
		client redis.UniversalClient
		key    string
		want   string
		field  string
	}{
		{nil, testKey, "lease: NewRedisLock: client is nil: pass a connected go-redis client", "client"},
		{nilClient, testKey, "lease: NewRedisLock: client is nil: pass a connected go-redis client", "client"},
		{rc, "", `lease: NewRedisLock: key is empty: use a key with a hash tag, e.g. "kjob:{<deployment>}:producer-lease"`, "key"},
		{cc, "kjob:prod:producer-lease", `lease: NewRedisLock: key = "kjob:prod:producer-lease" has no hash tag: on Redis Cluster the lease and epoch keys must share a slot; use e.g. "kjob:{<deployment>}:producer-lease"`, "key"},
		{cc, "kjob:{}:producer-lease", `lease: NewRedisLock: key = "kjob:{}:producer-lease" has no hash tag: on Redis Cluster the lease and epoch keys must share a slot; use e.g. "kjob:{<deployment>}:producer-lease"`, "key"},
	} {
		_, err := lease.NewRedisLock(tc.client, tc.key)
		if err == nil || err.Error() != tc.want {
			t.Errorf("NewRedisLock(%T, %q) = %v\nwant %s", tc.client, tc.key, err, tc.want)
		}
		// The error is typed: a caller tells which argument was refused.
		var ce *configerr.Error
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("NewRedisLock(%T, %q) = %#v, want a *configerr.Error about its argument", tc.client, tc.key, err)
		}
	}
	for _, c := range []redis.UniversalClient{rc, cc} {
		l, err := lease.NewRedisLock(c, testKey)
		if err != nil {
			t.Fatalf("NewRedisLock(%T, %q): %v", c, testKey, err)
		}
		if l.Key() != testKey || l.EpochKey() != testKey+":epoch" {
			t.Errorf("keys %q, %q", l.Key(), l.EpochKey())
		}
	}
}

// Release announces the released tenure on the lock's channel; renewals,
// failed acquisitions and releases of stale tenures announce nothing.
func TestRedisLockWatchReleases(t *testing.T) {
	l, rc := newLock(t)
	ctx := ctxT(t)
	wctx, stop := context.WithCancel(ctx)
	got := make(chan lease.Record, 10)
	done := make(chan error, 1)
	w, _ := lease.NewRedisLock(rc, testKey)
	go func() { done <- w.WatchReleases(wctx, func(r lease.Record) { got <- r }) }()
	waitSubscribers(t, rc, l, 1)

	a := mustAcquire(t, l, "a", time.Second)
	if err := l.Renew(ctx, a, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.TryAcquire(ctx, "b", time.Second); ok {
		t.Fatal("b acquired a held lease")
	}
	if err := l.Release(ctx, lease.Record{Holder: "a", Epoch: a.Epoch + 7}); err != nil { // not the tenure
		t.Fatal(err)
	}
	if err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := mustAcquire(t, l, "b", time.Second)
	if err := l.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []lease.Record{a, b} {
		select {
		case r := <-got:
			if !r.Acquired.Equal(want.Acquired) || r.Holder != want.Holder || r.Epoch != want.Epoch {
				t.Errorf("announced %+v, want %+v", r, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("release of %s/%d not announced within 5s", want.Holder, want.Epoch)
		}
	}
	stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("WatchReleases after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchReleases did not return within 5s of cancellation")
	}
	select {
	case r := <-got:
		t.Errorf("unexpected announcement %+v", r)
	default:
	}
	if l.Channel() != testKey+":released" {
		t.Errorf("Channel() = %q", l.Channel())
	}
}
