package specs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/base/names"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Opts are the Kafka client options: seed brokers, TLS, SASL
	// (required: at least kgo.SeedBrokers).
	Opts []kgo.Opt
	// Deployment names the topics (namespace and windows topic).
	Deployment names.Deployment
	// Actor is the authenticated principal the changes are recorded
	// under: the SASL user the client authenticates with, or the
	// dashboard's user. Default DefaultActor().
	Actor string
	// Source says where the changes come from (default SourceAPI).
	Source Source
	// Wait bounds how long Submit waits for the leader's Result. Default
	// DefaultWait; at most RequestTTL.
	Wait time.Duration
}

// DefaultWait is ClientConfig.Wait when it is zero: long enough for a
// leader's lease to move to a standby (the default lease TTL is 5s).
const DefaultWait = 15 * time.Second

// MaxRequestBytes bounds one request record, below Kafka's default
// message.max.bytes (1 MiB): a larger batch is split by SubmitAll.
const MaxRequestBytes = 900 << 10

// Client writes schedule change requests to the control topic and waits
// for the producer leader's answers, and reads the schedules topic and the
// change log. It is safe for concurrent use.
type Client struct {
	cfg ClientConfig
	ns  string
}

// NewClient validates cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if len(cfg.Opts) == 0 {
		return nil, &configerr.Error{Op: "schedules", Field: "Opts", Reason: "is empty: pass kgo.SeedBrokers(...) and the TLS/SASL options"}
	}
	cfg.Deployment = cfg.Deployment.WithDefaults()
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	if cfg.Source.Kind == "" {
		cfg.Source.Kind = SourceAPI
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Wait < 0 || cfg.Wait > RequestTTL {
		return nil, &configerr.Error{Op: "schedules", Field: "Wait", Value: cfg.Wait, Reason: fmt.Sprintf(": must be positive and at most %v (a leader drops older requests)", RequestTTL)}
	}
	return &Client{cfg: cfg, ns: cfg.Deployment.Namespace}, nil
}

// DefaultActor names a writer that did not authenticate:
// "unauthenticated:<os user>@<host>". A deployment that cares who changed
// what gives every writer a SASL user (see docs/schedules.md).
func DefaultActor() string {
	who := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who = u.Username
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown"
	}
	return "unauthenticated:" + who + "@" + host
}

// Actor returns the actor the client's changes are recorded under.
func (c *Client) Actor() string { return c.cfg.Actor }

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Submit asks the leader for edits, all or none, with note, and waits for
// its Result. A refusal is a *RefusedError (errors.Is ErrConflict,
// ErrNotFound, ErrInvalid, ErrTooLarge); no answer within the wait is
// ErrNoLeader. More than MaxEdits edits, or a request larger than
// MaxRequestBytes, is ErrTooLarge before anything is sent: use SubmitAll.
func (c *Client) Submit(ctx context.Context, edits []Edit, note string) (*Result, error) {
	if err := checkEdits(edits); err != nil {
		return nil, err
	}
	s, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	return s.submit(ctx, edits, note)
}

func checkEdits(edits []Edit) error {
	if len(edits) == 0 {
		return fmt.Errorf("%w: no edits", ErrInvalid)
	}
	if len(edits) > MaxEdits {
		return fmt.Errorf("%w: %d edits in one request, at most %d: split it (SubmitAll does)", ErrTooLarge, len(edits), MaxEdits)
	}
	return nil
}

// session writes requests and reads their results with one Kafka client
// each, for as many requests as SubmitAll sends: an apply of 100,000 jobs
// is 100 requests, and a pair of new clients and an offset listing for
// each cost about a tenth of the apply's time (docs/performance.md,
// "apply 100k new jobs").
type session struct {
	c     *Client
	topic string
	prod  *kgo.Client
	cons  *kgo.Client
}

// open starts a session: its reader starts at the control topic's end as
// it is before the first request is written, so every result that
// follows a request of the session is read.
func (c *Client) open(ctx context.Context) (*session, error) {
	topic := c.cfg.Deployment.ControlTopic()
	prod, err := kgo.NewClient(append(append([]kgo.Opt{}, c.cfg.Opts...), kgo.ProducerLinger(0))...)
	if err != nil {
		return nil, fmt.Errorf("schedules: kafka client: %w", err)
	}
	ends, err := kadm.NewClient(prod).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		prod.Close()
		return nil, fmt.Errorf("schedules: list end offsets of %s (the control topic: does the deployment exist? a producer creates it): %w", topic, err)
	}
	from := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) { from[o.Partition] = kgo.NewOffset().At(o.Offset) })
	cons, err := kgo.NewClient(append(append([]kgo.Opt{}, c.cfg.Opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		prod.Close()
		return nil, fmt.Errorf("schedules: kafka client: %w", err)
	}
	return &session{c: c, topic: topic, prod: prod, cons: cons}, nil
}

func (s *session) close() {
	s.cons.Close()
	s.prod.Close()
}

// submit writes one request and waits for its result.
func (s *session) submit(ctx context.Context, edits []Edit, note string) (*Result, error) {
	c := s.c
	req := &Request{ID: newID(), Namespace: c.ns, Actor: c.cfg.Actor, Source: c.cfg.Source, Note: note, IssuedAt: time.Now().UTC(), Edits: edits}
	rec, err := req.Record(s.topic)
	if err != nil {
		return nil, err
	}
	if len(rec.Value) > MaxRequestBytes {
		return nil, fmt.Errorf("%w: the request is %d bytes, at most %d: split it (SubmitAll does)", ErrTooLarge, len(rec.Value), MaxRequestBytes)
	}
	if err := s.prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return nil, fmt.Errorf("schedules: write request to %s: %w", s.topic, err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.Wait)
	defer cancel()
	for {
		fs := s.cons.PollFetches(wctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if wctx.Err() != nil {
			return nil, fmt.Errorf("%w: request %s (%d edits) not answered within %v: is a producer of namespace %q running and leading? "+
				"A leader that takes over before %s still applies it: check with `kjobctl schedule get`",
				ErrNoLeader, req.ID, len(edits), c.cfg.Wait, c.ns, req.IssuedAt.Add(RequestTTL).Format(time.RFC3339))
		}
		var res *Result
		fs.EachRecord(func(r *kgo.Record) {
			if res != nil || Kind(r) != KindResult {
				return
			}
			if x, err := ParseResult(r); err == nil && x.RequestID == req.ID && x.Namespace == c.ns {
				res = x
			}
		})
		if res != nil {
			return res, Refused(res, req)
		}
	}
}

// SubmitAll submits edits in as few requests as the limits allow
// (MaxEdits edits, MaxRequestBytes), in order, each applied all or none,
// one after the other over one pair of Kafka clients. It stops at the
// first refused or unanswered request: the results of the requests before
// it are returned with the error, those after it were not sent.
func (c *Client) SubmitAll(ctx context.Context, edits []Edit, note string) ([]*Result, error) {
	var out []*Result
	if len(edits) == 0 {
		return nil, nil
	}
	s, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	for len(edits) > 0 {
		n, size := 0, 512
		for n < len(edits) && n < MaxEdits {
			b, err := json.Marshal(edits[n])
			if err != nil {
				return out, fmt.Errorf("%w: edit of %s: %v", ErrInvalid, edits[n].Job, err)
			}
			if size+len(b)+1 > MaxRequestBytes && n > 0 {
				break
			}
			size += len(b) + 1
			n++
		}
		if err := checkEdits(edits[:n]); err != nil {
			return out, err
		}
		res, err := s.submit(ctx, edits[:n], note)
		if res != nil {
			out = append(out, res)
		}
		if err != nil {
			return out, err
		}
		edits = edits[n:]
	}
	return out, nil
}

// Snapshot reads the schedules topic to its end.
func (c *Client) Snapshot(ctx context.Context) (*Snapshot, error) {
	return ReadAll(ctx, c.cfg.Opts, c.cfg.Deployment.SchedulesTopic(), c.ns)
}

// Get returns job's current record, or an error wrapping ErrNotFound.
func (c *Client) Get(ctx context.Context, job string) (*Record, error) {
	s, err := c.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := s.Jobs[job]
	if !ok {
		if v, deleted := s.Deleted[job]; deleted {
			return nil, fmt.Errorf("schedule %q: %w (deleted at version %d)", job, ErrNotFound, v)
		}
		return nil, fmt.Errorf("schedule %q: %w in namespace %q", job, ErrNotFound, c.ns)
	}
	return r, nil
}

// History returns job's changes, oldest first ("" for every job's).
func (c *Client) History(ctx context.Context, job string) ([]*Change, error) {
	ch, _, err := History(ctx, c.cfg.Opts, c.cfg.Deployment.ScheduleLogTopic(), job)
	if err != nil {
		return nil, err
	}
	out := ch[:0]
	for _, x := range ch {
		if x.Namespace == c.ns {
			out = append(out, x)
		}
	}
	return out, nil
}

// IsRefused reports whether err is a leader's refusal (as opposed to
// Kafka or the wait failing).
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
