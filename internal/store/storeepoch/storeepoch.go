// Package storeepoch keeps kjob's fencing tokens strictly increasing across
// a Redis that loses its data.
//
// The token counters live in Redis with the claims (internal/store/dedupe). A Redis
// restarted without persistence starts them at 1 again; an AOF everysec
// crash or a failover to an asynchronous replica loses their last few
// increments. So the deployment keeps a store epoch outside Redis, in a
// small compacted Kafka topic (names.Deployment.EpochTopic, one record
// per bump keyed by the namespace), and mirrors it in Redis by an epoch
// marker (dedupe.Store.Mark) holding the epoch, its writer and the
// server's run_id. Every token of epoch e is above e << dedupe.EpochShift
// (dedupe.EpochFloor).
//
// A Guard checks the marker and the server's run_id when it starts and
// every Config.Interval:
//
//   - marker and run_id as proven: nothing to do;
//   - no marker while Kafka holds an epoch: the store was wiped. The Guard
//     logs an ERROR (what was lost), reports it (Status.Wiped, readiness),
//     bumps the epoch to Kafka's + 1 and proves it;
//   - the marker's run_id differs from the server's: the server restarted
//     or failed over since the marker was set, and may have lost its last
//     writes. The Guard bumps the epoch (a WARN);
//   - neither marker nor Kafka record: a new deployment (or one from before
//     the store epoch): epoch 0, whose floor is 0, so tokens go on as
//     before.
//
// Between the detection and the proof the store refuses every claim
// (dedupe.ErrStoreUnproven); a worker retries them as it does in a Redis
// outage. Bumps go to Kafka first, then to the marker, whose script
// raises it only (one winner when several workers race, the others adopt
// its epoch), so no token is ever taken under an epoch that Kafka could
// forget.
package storeepoch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/clock"
	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/topic"
)

// DefaultInterval is Config.Interval when it is zero.
const DefaultInterval = time.Second

// markerGrace is how long a check that finds an epoch in Kafka but no
// marker waits before it calls the store wiped: another worker may be
// between writing an epoch to Kafka and to the marker (at a fresh start,
// when two workers start together).
const markerGrace = 250 * time.Millisecond

// Config configures a Guard. Brokers, Topic, Namespace and Store are
// required.
type Config struct {
	// Brokers are the Kafka seed brokers.
	Brokers []string
	// ClientOpts are extra franz-go options (TLS, SASL).
	ClientOpts []kgo.Opt
	// Topic is the epoch topic (names.Deployment.EpochTopic). The Guard
	// creates it, compacted with one partition, if it does not exist.
	Topic string
	// Namespace is the deployment's namespace: the key of its records.
	Namespace string
	// ReplicationFactor of the topic when the Guard creates it. Default 1.
	ReplicationFactor int16
	// Store is the deployment's idempotency store. New makes it refuse
	// claims until the first check proves an epoch.
	Store *dedupe.Store
	// Interval is how often the marker and run_id are checked. Default
	// DefaultInterval (1s).
	Interval time.Duration
	// ID names this process in the marker and the records (the worker id).
	// Default a random id.
	ID string
	// Logger receives the Guard's logs. Default slog.Default().
	Logger *slog.Logger
}

// Status is what a Guard knows of the store epoch.
type Status struct {
	// Epoch is the proven epoch (the last one proven while not Proven).
	Epoch int64
	// Proven tells whether the store claims now.
	Proven bool
	// Wiped is true from the detection of a wiped store until a new epoch
	// is proven.
	Wiped bool
	// Err is why the epoch is not proven (nil when Proven).
	Err error
	// Wipes and Restarts count the losses this Guard detected: a wiped
	// store, and a server restarted or failed over (a possible partial
	// loss).
	Wipes, Restarts int64
}

// Guard proves the store epoch; see the package doc. Create it with New and
// run it with Run.
type Guard struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	st      Status
	ensured bool
	noRunID bool // INFO refused: logged once

	firstOnce sync.Once
	first     chan struct{} // closed at the first proof

	cl *kgo.Client
}

// New validates cfg and returns a Guard. It makes cfg.Store refuse claims
// (dedupe.ErrStoreUnproven) until Run's first check proves an epoch.
func New(cfg Config) (*Guard, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, &configerr.Error{Op: "storeepoch", Field: "Config.Brokers", Reason: "is empty; list the Kafka seed brokers"}
	case cfg.Topic == "":
		return nil, &configerr.Error{Op: "storeepoch", Field: "Config.Topic", Reason: "is empty; set it to the deployment's epoch topic (names.Deployment.EpochTopic)"}
	case cfg.Namespace == "":
		return nil, &configerr.Error{Op: "storeepoch", Field: "Config.Namespace", Reason: "is empty; set it to the deployment's namespace"}
	case cfg.Store == nil:
		return nil, &configerr.Error{Op: "storeepoch", Field: "Config.Store", Reason: "is nil; pass the deployment's *dedupe.Store"}
	case cfg.Interval < 0:
		return nil, &configerr.Error{Op: "storeepoch", Field: "Config.Interval", Value: cfg.Interval, Reason: "is negative; set it to a positive duration, or 0 for the default 1s"}
	case cfg.ReplicationFactor < 0:
		return nil, &configerr.Error{Op: "storeepoch", Field: "Config.ReplicationFactor", Value: cfg.ReplicationFactor, Reason: "is negative; set it to at least 1, or 0 for the default 1"}
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = topic.DefaultReplicationFactor
	}
	if cfg.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.ID = hex.EncodeToString(b[:])
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Store.Unprove()
	return &Guard{cfg: cfg, log: cfg.Logger, st: Status{Err: errors.New("store epoch not checked yet")}, first: make(chan struct{})}, nil
}

// Status returns what the Guard knows now.
func (g *Guard) Status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st
}

// FirstProven is closed once the Guard has proven an epoch for the first
// time: the store claims from then on (while it stays proven).
func (g *Guard) FirstProven() <-chan struct{} { return g.first }

// Ready returns nil while the epoch is proven, otherwise why not: the
// worker is not ready (/readyz) while it cannot claim.
func (g *Guard) Ready() error {
	st := g.Status()
	switch {
	case st.Proven:
		return nil
	case st.Wiped:
		return fmt.Errorf("redis lost its data (the store epoch marker is gone); claims wait for a new store epoch: %w", st.Err)
	}
	return fmt.Errorf("store epoch not proven; claims wait: %w", st.Err)
}

// Run checks the store epoch at once and then every Config.Interval until
// ctx is done (a failed check is retried with backoff, up to the
// interval). It returns nil when ctx ends, or an error if its Kafka client
// cannot be made. A Guard runs once.
func (g *Guard) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(g.cfg.Brokers...), kgo.ProducerLinger(0)}, g.cfg.ClientOpts...)...)
	if err != nil {
		return g.unproven(fmt.Errorf("storeepoch: kafka client: %w", err))
	}
	defer cl.Close()
	g.cl = cl
	b := backoff.Backoff{Min: 50 * time.Millisecond, Max: g.cfg.Interval}
	for {
		delay := g.cfg.Interval
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := g.check(cctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			delay = b.Next()
			g.log.Debug("store epoch check failed; retrying", "err", err, "retry_in", delay)
		} else {
			b.Reset()
		}
		if clock.Sleep(ctx, delay) != nil {
			return nil
		}
	}
}

// record is the value of an epoch record.
type record struct {
	Epoch int64     `json:"epoch"`
	By    string    `json:"by"`
	Cause string    `json:"cause"`
	At    time.Time `json:"at"`
}

// check checks the store once (see the package doc), bumping and proving
// the epoch if needed. An error leaves claims refused if they were (or
// allowed, when the check could not reach Redis: claims fail then too).
func (g *Guard) check(ctx context.Context) error {
	store := g.cfg.Store
	runID, rerr := store.RunID(ctx)
	if rerr != nil {
		g.mu.Lock()
		first := !g.noRunID
		g.noRunID = true
		g.mu.Unlock()
		if first {
			g.log.Warn("cannot read the redis server's run_id, so a restart or failover that loses the last writes (AOF everysec, an asynchronous replica) is not detected; only a wiped store is. Grant the worker's Redis user +info",
				"err", rerr)
		}
		runID = ""
	}
	m, ok, err := store.ReadMarker(ctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	st := g.st
	g.mu.Unlock()
	_, claims := store.Epoch() // false after a claim script found the marker changed
	if st.Proven && claims && ok && m.Epoch == st.Epoch && (runID == "" || m.RunID == runID) {
		return nil
	}

	// Something to settle: no claim until it is.
	store.Unprove()
	why := "the store epoch marker changed"
	switch {
	case !ok:
		why = "the store epoch marker is missing"
	case runID != "" && m.RunID != runID:
		why = "the redis server's run_id changed (restart or failover)"
	case !st.Proven:
		why = "the store epoch is not proven yet"
	}
	g.unproven(errors.New(why))
	k, kok, err := g.readKafka(ctx)
	if err != nil {
		return g.unproven(fmt.Errorf("read the store epoch from kafka topic %s: %w", g.cfg.Topic, err))
	}
	if !ok && kok {
		// Kafka holds an epoch and the marker is missing: a wipe, or a
		// writer between its two steps (Kafka, then the marker). Look
		// again once such a writer would have finished.
		if err := clock.Sleep(ctx, markerGrace); err != nil {
			return g.unproven(err)
		}
		if m, ok, err = store.ReadMarker(ctx); err != nil {
			return g.unproven(err)
		}
	}
	var target int64
	cause := ""
	switch {
	case !ok && !kok:
		target, cause = 0, "new" // a new deployment, or one from before the store epoch
	case !ok:
		target, cause = k+1, "wiped"
		g.mu.Lock()
		newIncident := !g.st.Wiped
		g.st.Wiped = true
		if newIncident {
			g.st.Wipes++
		}
		g.mu.Unlock()
		if newIncident {
			g.log.Error("redis lost its data: the store epoch marker is gone while kafka holds an epoch. Claims are refused until a new store epoch is proven; fencing tokens will continue above its floor. "+
				"Lost with the data: the idempotency records of windows not yet committed (they may run again), paused jobs (now running), the run history, the operators' audit stream and the redrive records",
				"cause", "wiped", "epoch", k, "new_epoch", target, "topic", g.cfg.Topic)
		}
	case runID != "" && m.RunID != "" && m.RunID != runID:
		target, cause = max(m.Epoch, k)+1, "restarted"
		g.mu.Lock()
		g.st.Restarts++
		g.mu.Unlock()
		g.log.Warn("the redis server restarted or failed over since the store epoch was set, and may have lost its last writes (token increments among them); bumping the store epoch",
			"cause", "restarted", "epoch", m.Epoch, "new_epoch", target, "run_id", runID, "marker_run_id", m.RunID)
	default:
		target = max(m.Epoch, k) // consistent, or a writer between its two steps
	}
	if target > dedupe.MaxEpoch {
		return g.unproven(fmt.Errorf("store epoch %d is above the maximum %d: tokens would pass 2^53", target, dedupe.MaxEpoch))
	}
	if !kok || target > k {
		// Kafka first: no token is ever taken under an epoch Kafka lacks.
		if err := g.write(ctx, record{Epoch: target, By: g.cfg.ID, Cause: cause, At: time.Now().UTC()}); err != nil {
			return g.unproven(fmt.Errorf("write store epoch %d to kafka topic %s: %w", target, g.cfg.Topic, err))
		}
	}
	got, err := store.Mark(ctx, target, g.cfg.ID, runID)
	if err != nil {
		return g.unproven(err)
	}
	if got.Epoch != target || (runID != "" && got.RunID != runID) {
		// Another worker raised it further meanwhile: check again.
		return g.unproven(fmt.Errorf("the store epoch marker moved to %d (by %s) while proving %d; checking again", got.Epoch, got.ID, target))
	}
	if err := store.SetEpoch(target); err != nil {
		return g.unproven(err)
	}
	g.mu.Lock()
	wasWiped := g.st.Wiped
	g.st.Epoch, g.st.Proven, g.st.Wiped, g.st.Err = target, true, false, nil
	g.mu.Unlock()
	g.firstOnce.Do(func() { close(g.first) })
	switch {
	case wasWiped:
		g.log.Warn("store epoch proven after redis lost its data: claims resume, every new fencing token exceeds the earlier ones",
			"cause", "wiped", "epoch", target, "floor", dedupe.EpochFloor(target), "marker", got.ID)
	case target != st.Epoch || !st.Proven:
		g.log.Info("store epoch proven", "epoch", target, "floor", dedupe.EpochFloor(target), "marker", got.ID, "cause", cause)
	}
	return nil
}

// unproven records err as why the epoch is not proven, and returns it.
func (g *Guard) unproven(err error) error {
	g.mu.Lock()
	g.st.Proven, g.st.Err = false, err
	g.mu.Unlock()
	return err
}

// ensure creates the topic once.
func (g *Guard) ensure(ctx context.Context) error {
	g.mu.Lock()
	done := g.ensured
	g.mu.Unlock()
	if done {
		return nil
	}
	advice, err := topic.EnsureWithAdvice(ctx, kadm.NewClient(g.cl), topic.Spec{Name: g.cfg.Topic, Partitions: 1, ReplicationFactor: g.cfg.ReplicationFactor, Compacted: true})
	if err != nil {
		return err
	}
	topic.LogAdvice(g.log, advice)
	g.mu.Lock()
	g.ensured = true
	g.mu.Unlock()
	return nil
}

// readKafka returns the highest epoch recorded for the namespace; ok is
// false when there is none.
func (g *Guard) readKafka(ctx context.Context) (epoch int64, ok bool, err error) {
	if err := g.ensure(ctx); err != nil {
		return 0, false, err
	}
	adm := kadm.NewClient(g.cl)
	starts, err := adm.ListStartOffsets(ctx, g.cfg.Topic)
	if err != nil {
		return 0, false, err
	}
	ends, err := adm.ListEndOffsets(ctx, g.cfg.Topic)
	if err != nil {
		return 0, false, err
	}
	s, sok := starts.Lookup(g.cfg.Topic, 0)
	e, eok := ends.Lookup(g.cfg.Topic, 0)
	if !sok || !eok || s.Err != nil || e.Err != nil {
		return 0, false, fmt.Errorf("list offsets: %v %v", s.Err, e.Err)
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(g.cfg.Brokers...)}, g.cfg.ClientOpts...)
	err = kread.Each(ctx, opts, g.cfg.Topic, 0, s.Offset, e.Offset, func(r *kgo.Record) error {
		if string(r.Key) != g.cfg.Namespace {
			return nil
		}
		var rec record
		if json.Unmarshal(r.Value, &rec) != nil || rec.Epoch < 0 {
			g.log.Warn("ignoring an undecodable store epoch record", "topic", g.cfg.Topic, "offset", r.Offset)
			return nil
		}
		if !ok || rec.Epoch > epoch {
			epoch, ok = rec.Epoch, true
		}
		return nil
	})
	return epoch, ok, err
}

// write appends rec to the topic and waits for it to be acknowledged by
// every in-sync replica.
func (g *Guard) write(ctx context.Context, rec record) error {
	if err := g.ensure(ctx); err != nil {
		return err
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return g.cl.ProduceSync(ctx, &kgo.Record{Topic: g.cfg.Topic, Partition: 0, Key: []byte(g.cfg.Namespace), Value: v}).FirstErr()
}
