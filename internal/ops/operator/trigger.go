package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/window"
	"github.com/kjob/kjob/schedule"
)

// Trigger publishes one manual window of job j to deployment d's windows
// topic, [now, the job's next fire time), labelled with d's namespace, with
// id jobmsg.ManualID (a random nonce tells two triggers in one instant
// apart) and payload (nil: the job's own), built by window.Record as
// every window is, and waits for Kafka to acknowledge it. cl must partition by key as the producer does
// (names.Partitioner: murmur2) and sign when the workers require
// signatures. The window runs whether the job is paused or disabled. A
// payload larger than schedule.MaxPayloadBytes is refused, as the
// schedules file refuses it.
func Trigger(ctx context.Context, cl *kgo.Client, d names.Deployment, j *schedule.Job, payload json.RawMessage, now time.Time) (*jobmsg.Message, *kgo.Record, error) {
	if why := schedule.PayloadTooLarge(len(payload)); why != "" {
		return nil, nil, fmt.Errorf("trigger %s: payload %s", j.Name, why)
	}
	nonce := make([]byte, 4)
	_, _ = rand.Read(nonce)
	d = d.WithDefaults()
	topic := d.Topic
	m, rec, err := window.Record(j, topic, window.Publication{Start: now, Trigger: jobmsg.TriggerManual, Nonce: hex.EncodeToString(nonce), PublishedAt: now, Payload: payload, Namespace: d.Namespace})
	if err != nil {
		return nil, nil, err
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return nil, nil, fmt.Errorf("publish to %s: %w", topic, err)
	}
	return m, rec, nil
}
