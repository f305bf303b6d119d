package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/partition"
	"github.com/kjob/kjob/internal/store/topic"
)

// Seeker is the worker side of a seek: *worker.Worker (and
// *partition.Consumer) implement it.
type Seeker interface {
	// Assigned returns the partitions this member owns now.
	Assigned() []int32
	// Seek moves an owned partition to offset and commits it.
	Seek(ctx context.Context, partition int32, offset int64) error
}

// Skipper is the worker side of a replay forward that skips what it
// moves past (SeekRequest.SkipUnsettled): *worker.Worker implements it.
type Skipper interface {
	// SeekSkipping moves an owned partition from offset from forward to
	// offset, as Seek does, and settles the windows in between that are
	// not settled as skipped by a replay, with reason; it returns how
	// many it settled.
	SeekSkipping(ctx context.Context, partition int32, from, offset int64, reason string) (int, error)
}

// AgentConfig configures an Agent. Brokers, Group, Topic, Member and Seeker
// are required.
type AgentConfig struct {
	// Brokers are the Kafka seed brokers.
	Brokers []string
	// ClientOpts are extra Kafka client options (TLS, SASL).
	ClientOpts []kgo.Opt
	// Group is the workers' consumer group.
	Group string
	// Topic is the windows topic.
	Topic string
	// ControlTopic is the control topic. Default Topic + ".control"
	// (names.Deployment.ControlTopic).
	ControlTopic string
	// ReplicationFactor of the control topic when the Agent creates it.
	// Default 1.
	ReplicationFactor int16
	// Member is this worker's id, reported in acks.
	Member string
	// Seeker applies seeks; usually the *worker.Worker.
	Seeker Seeker
	// Logger receives the agent's logs. Default slog.Default().
	Logger *slog.Logger
}

// Agent is the worker side of the control protocol: it reads the control
// topic from the moment Run starts and applies each SeekRequest for the
// partitions its Seeker owns, answering with a SeekAck per partition.
type Agent struct {
	cfg AgentConfig
	log *slog.Logger

	// applied remembers, per request id, the ack of each partition it
	// was applied to, for the last rememberRequests ids (order): a
	// request re-sent by its requester (it re-sends until every
	// partition is acknowledged) is acknowledged again from here, never
	// applied twice. Only Run's goroutine touches them.
	applied map[string]map[int32]SeekAck
	order   []string
}

// rememberRequests is how many request ids an Agent remembers.
const rememberRequests = 1024

// configError is a *configerr.Error about field of AgentConfig.
func configError(field string, value any, reason string) error {
	return &configerr.Error{Op: "control", Field: field, Value: value, Reason: reason}
}

// NewAgent validates cfg and returns an Agent. A setting it refuses is a
// *configerr.Error.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, configError("AgentConfig.Brokers", nil, `is empty; set at least one seed broker, e.g. "localhost:9092"`)
	case cfg.Group == "":
		return nil, configError("AgentConfig.Group", nil, `is empty; set the workers' consumer group, e.g. "kjob-workers"`)
	case cfg.Topic == "":
		return nil, configError("AgentConfig.Topic", nil, `is empty; set the windows topic, e.g. "kjob.windows"`)
	case cfg.Member == "":
		return nil, configError("AgentConfig.Member", nil, "is empty; set the worker id")
	case cfg.Seeker == nil:
		return nil, configError("AgentConfig.Seeker", nil, "is nil; pass the *worker.Worker")
	case cfg.ReplicationFactor < 0:
		return nil, configError("AgentConfig.ReplicationFactor", cfg.ReplicationFactor, "is negative; set it to the replica count, or 0 for 1")
	}
	ctl := names.Deployment{Topic: cfg.Topic}.ControlTopic()
	if cfg.ControlTopic == "" {
		cfg.ControlTopic = ctl
	}
	if cfg.ControlTopic == cfg.Topic {
		return nil, configError("AgentConfig.ControlTopic", cfg.ControlTopic, fmt.Sprintf("is the windows topic; leave it empty for %q", ctl))
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = topic.DefaultReplicationFactor
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Agent{cfg: cfg, log: cfg.Logger.With("worker", cfg.Member, "control_topic", cfg.ControlTopic), applied: map[string]map[int32]SeekAck{}}, nil
}

// EnsureTopic creates the control topic if it is missing (one partition,
// normal retention) and checks an existing one.
func EnsureTopic(ctx context.Context, adm *kadm.Client, name string, rf int16) error {
	return topic.Ensure(ctx, adm, topic.Spec{Name: name, Partitions: 1, ReplicationFactor: rf})
}

// Run applies seek requests until ctx is done; it returns nil then, and an
// error wrapping topic.ErrMismatch if the control topic exists with other
// settings. Kafka errors are retried.
func (a *Agent) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.ConsumeTopics(a.cfg.ControlTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.ProducerLinger(0),
	}, a.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("control: kafka client: %w", err)
	}
	defer cl.Close()
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := EnsureTopic(tctx, kadm.NewClient(cl), a.cfg.ControlTopic, a.cfg.ReplicationFactor)
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, topic.ErrMismatch) {
			return fmt.Errorf("control: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := b.Next()
		a.log.Warn("cannot check the control topic; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
	a.log.Info("control agent running", "group", a.cfg.Group)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			a.log.Warn("control topic fetch error", "partition", p, "err", err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if Kind(r) != KindSeek {
				return
			}
			req, err := ParseSeekRequest(r)
			if err != nil {
				a.log.Warn("ignoring an invalid control record", "err", err)
				return
			}
			if req.Group != a.cfg.Group || req.Topic != a.cfg.Topic {
				return
			}
			a.apply(ctx, cl, req)
		})
	}
}

func (a *Agent) apply(ctx context.Context, cl *kgo.Client, req *SeekRequest) {
	owned := map[int32]bool{}
	for _, p := range a.cfg.Seeker.Assigned() {
		owned[p] = true
	}
	for p, off := range req.Offsets {
		if !owned[p] {
			continue
		}
		if prev, ok := a.applied[req.ID][p]; ok {
			// A re-sent request: applied once already (the requester had
			// not seen the ack yet). Acknowledge it again, move nothing.
			a.log.Info("seek request applied already; acknowledging it again without moving the partition", "request", req.ID, "partition", p, "offset", prev.Offset)
			prev.Duplicate, prev.At = true, time.Now().UTC()
			a.send(ctx, cl, &prev)
			continue
		}
		ack := SeekAck{RequestID: req.ID, Group: req.Group, Topic: req.Topic, Partition: p, Offset: off, Member: a.cfg.Member}
		err := a.seek(ctx, req, p, off, &ack)
		ack.At = time.Now().UTC()
		switch {
		case err == nil:
			a.log.Info("seek applied", "request", req.ID, "partition", p, "offset", off, "issued_by", req.IssuedBy, "skipped", ack.Skipped)
		case ctx.Err() != nil:
			return
		default:
			// Not owned any more (revoked meanwhile): the requester
			// re-sends to the new owner; do not ack.
			if isNotOwned(err) {
				a.log.Info("seek request for a partition revoked meanwhile; its new owner gets it", "request", req.ID, "partition", p)
				continue
			}
			ack.Error = err.Error()
			a.log.Warn("seek failed", "request", req.ID, "partition", p, "offset", off, "err", err)
		}
		a.remember(ack)
		a.send(ctx, cl, &ack)
	}
}

// seek applies req to partition p: a plain seek, or with SkipUnsettled
// and a move forward, one that settles what it skips (Skipper).
func (a *Agent) seek(ctx context.Context, req *SeekRequest, p int32, off int64, ack *SeekAck) error {
	from, forward := req.From[p]
	if !req.SkipUnsettled || !forward || off <= from {
		return a.cfg.Seeker.Seek(ctx, p, off)
	}
	sk, ok := a.cfg.Seeker.(Skipper)
	if !ok {
		return fmt.Errorf("control: this worker cannot settle the windows a replay skips (its Seeker is not a control.Skipper); nothing was moved")
	}
	n, err := sk.SeekSkipping(ctx, p, from, off, fmt.Sprintf("request %s by %s", req.ID, orUnknown(req.IssuedBy)))
	ack.Skipped = n
	return err
}

func orUnknown(s string) string {
	if s == "" {
		return "an unnamed operator"
	}
	return s
}

// remember records ack as the result of its request on its partition.
func (a *Agent) remember(ack SeekAck) {
	m, ok := a.applied[ack.RequestID]
	if !ok {
		if len(a.order) >= rememberRequests {
			delete(a.applied, a.order[0])
			a.order = a.order[1:]
		}
		a.order = append(a.order, ack.RequestID)
		m = map[int32]SeekAck{}
		a.applied[ack.RequestID] = m
	}
	m[ack.Partition] = ack
}

// send writes ack to the control topic; a failure is logged (the
// requester re-sends, and the ack is repeated from memory).
func (a *Agent) send(ctx context.Context, cl *kgo.Client, ack *SeekAck) {
	rec, err := ack.Record(a.cfg.ControlTopic)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = cl.ProduceSync(pctx, rec).FirstErr()
		cancel()
	}
	if err != nil {
		a.log.Warn("cannot write seek ack; the requester will re-send", "request", ack.RequestID, "partition", ack.Partition, "err", err)
	}
}

func isNotOwned(err error) bool { return errors.Is(err, partition.ErrNotOwned) }
