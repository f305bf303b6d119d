package service

import (
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// syncedMetrics is kprom's Metrics shared by the clients of one process,
// made safe for a client created while another runs: kprom's OnNewClient
// replaces the metric vectors that the other hooks use, and a running
// client's produce hook (run on a goroutine kgo does not wait for on Close)
// reads them without a lock. The producer makes a new transactional client
// for each publishing term, so a term restarted after a Kafka error raced
// with the last one's hooks (a race CI's -race run caught in
// TestProducerPublishesWindows). OnNewClient and OnClientClosed take the
// write lock, every other hook the read lock: a few tens of nanoseconds a
// broker request, none a record.
type syncedMetrics struct {
	mu sync.RWMutex
	m  *kprom.Metrics
}

var (
	_ kgo.HookNewClient           = (*syncedMetrics)(nil)
	_ kgo.HookClientClosed        = (*syncedMetrics)(nil)
	_ kgo.HookBrokerConnect       = (*syncedMetrics)(nil)
	_ kgo.HookBrokerDisconnect    = (*syncedMetrics)(nil)
	_ kgo.HookBrokerThrottle      = (*syncedMetrics)(nil)
	_ kgo.HookProduceBatchWritten = (*syncedMetrics)(nil)
	_ kgo.HookFetchBatchRead      = (*syncedMetrics)(nil)
	_ kgo.HookBrokerRead          = (*syncedMetrics)(nil)
	_ kgo.HookBrokerWrite         = (*syncedMetrics)(nil)
	_ kgo.HookBrokerE2E           = (*syncedMetrics)(nil)
)

func (s *syncedMetrics) OnNewClient(c *kgo.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.OnNewClient(c)
}

func (s *syncedMetrics) OnClientClosed(c *kgo.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.OnClientClosed(c)
}

func (s *syncedMetrics) OnBrokerConnect(meta kgo.BrokerMetadata, d time.Duration, conn net.Conn, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.m.OnBrokerConnect(meta, d, conn, err)
}

func (s *syncedMetrics) OnBrokerDisconnect(meta kgo.BrokerMetadata, conn net.Conn) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.m.OnBrokerDisconnect(meta, conn)
}

func (s *syncedMetrics) OnBrokerThrottle(meta kgo.BrokerMetadata, interval time.Duration, after bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.m.OnBrokerThrottle(meta, interval, after)
}

func (s *syncedMetrics) OnProduceBatchWritten(meta kgo.BrokerMetadata, topic string, partition int32, pm kgo.ProduceBatchMetrics) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.m.OnProduceBatchWritten(meta, topic, partition, pm)
}

func (s *syncedMetrics) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, partition int32, fm kgo.FetchBatchMetrics) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.m.OnFetchBatchRead(meta, topic, partition, fm)
}

func (s *syncedMetrics) OnBrokerRead(meta kgo.BrokerMetadata, key int16, n int, wait, took time.Duration, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.m.OnBrokerRead(meta, key, n, wait, took, err)
}

func (s *syncedMetrics) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, n int, wait, took time.Duration, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.m.OnBrokerWrite(meta, key, n, wait, took, err)
}

func (s *syncedMetrics) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.m.OnBrokerE2E(meta, key, e2e)
}
