package testenv

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RunAt makes c run do when the first request of key (kmsg.Key) that
// match accepts arrives, before the broker handles it; the broker then
// handles it as usual (or a control function added after this one does).
// do runs while c serves other requests (kfake's SleepControl), so it may
// produce to c with a client of its own; that client must not send a
// request match accepts. The returned channel is closed once do has
// returned. match may be called concurrently.
func RunAt(c *kfake.Cluster, key kmsg.Key, match func(kmsg.Request) bool, do func()) <-chan struct{} {
	done := make(chan struct{})
	var ran atomic.Bool
	c.ControlKey(key.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !ran.Load() && match(req) && ran.CompareAndSwap(false, true) {
			c.SleepControl(func() {
				do()
				close(done)
			})
		}
		return nil, nil, false // the broker answers it
	})
	return done
}

// ListsOffsetsOf returns a match for RunAt that accepts a ListOffsets
// request of topic whose first partition's timestamp ts accepts (-1: the
// end offsets, -2: the start offsets, 0 or more: by time).
func ListsOffsetsOf(topic string, ts func(int64) bool) func(kmsg.Request) bool {
	return func(req kmsg.Request) bool {
		for _, t := range req.(*kmsg.ListOffsetsRequest).Topics {
			if t.Topic == topic && len(t.Partitions) > 0 && ts(t.Partitions[0].Timestamp) {
				return true
			}
		}
		return false
	}
}

// WriteWhileListingSince makes c run write in the middle of the next
// listing of topic's offsets by timestamp (kadm's ListOffsetsAfterMilli)
// that finds no record at or after the timestamp: after the broker has
// answered -1 and before it answers the end-offset listing kadm then
// sends. See RunAt.
func WriteWhileListingSince(c *kfake.Cluster, topic string, write func()) <-chan struct{} {
	var byTime atomic.Bool
	return RunAt(c, kmsg.ListOffsets, func(req kmsg.Request) bool {
		if ListsOffsetsOf(topic, func(ts int64) bool { return ts >= 0 })(req) {
			byTime.Store(true)
			return false
		}
		return byTime.Load() && ListsOffsetsOf(topic, func(ts int64) bool { return ts == -1 })(req)
	}, write)
}
