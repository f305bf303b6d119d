package preflight

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/base/backoff"
)

// API is a Kafka request a kjob process sends.
type API struct {
	// Key is the request's API key (kmsg.Produce, kmsg.EndTxn, ...).
	Key kmsg.Key
	// Use says what the process sends it for, for the error message.
	Use string
}

// Name is the request's name as Kafka spells it, e.g. "InitProducerID".
func (a API) Name() string { return kmsg.NameForKey(int16(a.Key)) }

// ProducerAPIs are the requests a producer process sends.
var ProducerAPIs = []API{
	{kmsg.Metadata, "finds topics and brokers"},
	{kmsg.CreateTopics, "creates the windows and state topics"},
	{kmsg.DescribeConfigs, "checks the state topic's compaction"},
	{kmsg.FindCoordinator, "finds the transaction coordinator"},
	{kmsg.InitProducerID, "fences an older leader"},
	{kmsg.AddPartitionsToTxn, "publishes in transactions"},
	{kmsg.Produce, "publishes windows"},
	{kmsg.EndTxn, "commits each transaction"},
	{kmsg.ListOffsets, "finds the end of the state topic"},
	{kmsg.Fetch, "reads the state topic"},
}

// WorkerAPIs are the requests a worker process sends.
var WorkerAPIs = []API{
	{kmsg.Metadata, "finds topics and brokers"},
	{kmsg.CreateTopics, "creates the dead-letter and control topics"},
	{kmsg.FindCoordinator, "finds the group coordinator"},
	{kmsg.JoinGroup, "joins the consumer group"},
	{kmsg.SyncGroup, "receives its partitions"},
	{kmsg.Heartbeat, "keeps its partitions"},
	{kmsg.LeaveGroup, "hands its partitions over at shutdown"},
	{kmsg.OffsetCommit, "commits settled windows"},
	{kmsg.OffsetFetch, "resumes from committed offsets"},
	{kmsg.DescribeGroups, "reports lag and checks its group grant"},
	{kmsg.ListOffsets, "measures lag"},
	{kmsg.Fetch, "reads windows"},
	{kmsg.Produce, "writes dead letters and replay acknowledgements"},
}

// ErrMissingAPI is wrapped by the error CheckKafkaAPIs returns when a
// broker does not implement a request the process sends.
var ErrMissingAPI = errors.New("kafka broker lacks an API kjob needs")

// MissingAPIError names a broker and the requests it does not implement.
type MissingAPIError struct {
	// Node is the broker's node id.
	Node int32
	// Guess is kversion's guess of what the broker is, e.g. "v2.0".
	Guess string
	// Missing are the requests it does not list in its ApiVersions answer.
	Missing []API
}

// Error names each missing request and what kjob uses it for.
func (e *MissingAPIError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, a := range e.Missing {
		parts[i] = fmt.Sprintf("%s (key %d: kjob %s)", a.Name(), a.Key, a.Use)
	}
	return fmt.Sprintf("kafka broker %d (%s) does not implement %s: use a broker that implements them (kjob is written against Apache Kafka 3.9 and later)",
		e.Node, e.Guess, strings.Join(parts, ", "))
}

// Unwrap returns ErrMissingAPI.
func (e *MissingAPIError) Unwrap() error { return ErrMissingAPI }

// CheckKafkaAPIs reads every broker's ApiVersions answer before a
// component starts and returns a *MissingAPIError (wrapping
// ErrMissingAPI) if one of them lacks a request in need: without this, a
// broker that cannot serve kjob looks like one that cannot be reached and
// the process retries for ever. It retries while no broker answers, and
// returns nil once every broker that answered implements every request,
// or ctx.Err().
func CheckKafkaAPIs(ctx context.Context, log *slog.Logger, brokers []string, opts []kgo.Opt, need []API) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		vs, err := adm.ApiVersions(cctx)
		cancel()
		answered := 0
		if err == nil {
			for _, v := range vs.Sorted() {
				if v.Err != nil {
					continue
				}
				answered++
				var missing []API
				for _, a := range need {
					if _, ok := v.KeyMaxVersion(int16(a.Key)); !ok {
						missing = append(missing, a)
					}
				}
				if len(missing) > 0 {
					return &MissingAPIError{Node: v.NodeID, Guess: v.VersionGuess(), Missing: missing}
				}
			}
			if answered > 0 {
				return nil
			}
			for _, v := range vs {
				err = errors.Join(err, fmt.Errorf("broker %d: %w", v.NodeID, v.Err))
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := b.Next()
		log.Warn("cannot read kafka's API versions yet; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}
