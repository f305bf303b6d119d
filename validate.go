package kjob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/store/topic"
)

// checkBrokers refuses an empty list and any entry that is not host:port
// with a host and a port from 1 to 65535: such a seed can never be
// dialled, and franz-go would retry it for ever. field is the config's
// name of the list ("WorkerConfig.Brokers").
func checkBrokers(field string, brokers []string) error {
	if len(brokers) == 0 {
		return &configerr.Error{Op: "kjob", Field: field, Reason: "is empty; list the Kafka seed brokers, e.g. 127.0.0.1:9092"}
	}
	for i, b := range brokers {
		f := fmt.Sprintf("%s[%d]", field, i)
		host, port, err := net.SplitHostPort(strings.TrimSpace(b))
		switch {
		case strings.TrimSpace(b) == "":
			return &configerr.Error{Op: "kjob", Field: f, Value: b, Reason: "is empty; want host:port, e.g. kafka-1:9092, or drop the entry"}
		case err != nil:
			return &configerr.Error{Op: "kjob", Field: f, Value: b, Reason: "is not host:port; want e.g. kafka-1:9092", Err: err}
		case host == "":
			return &configerr.Error{Op: "kjob", Field: f, Value: b, Reason: "has no host; want host:port, e.g. kafka-1:9092"}
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return &configerr.Error{Op: "kjob", Field: f, Value: b, Reason: fmt.Sprintf("has port %q, not a number from 1 to 65535; want host:port, e.g. kafka-1:9092", port)}
		}
	}
	return nil
}

// checkRedis refuses a nil client, including a nil pointer of a client
// type in the interface (var c *redis.Client; cfg.Redis = c), which would
// panic on first use.
func checkRedis(field string, rdb redis.UniversalClient) error {
	if rdb == nil {
		return &configerr.Error{Op: "kjob", Field: field, Reason: "is nil; pass a client, e.g. redis.NewClient(&redis.Options{Addr: \"127.0.0.1:6379\"})"}
	}
	if v := reflect.ValueOf(rdb); v.Kind() == reflect.Pointer && v.IsNil() {
		return &configerr.Error{Op: "kjob", Field: field, Value: fmt.Sprintf("(%T)(nil)", rdb),
			Reason: "is a nil pointer; pass a client created with redis.NewClient, redis.NewClusterClient or redis.NewFailoverClient"}
	}
	return nil
}

// redisClosedPoll is how often a running process checks that its Redis
// client was not closed under it.
const redisClosedPoll = 2 * time.Second

// redisWatch stops a process whose Redis client is closed: go-redis then
// answers every command with redis.ErrClosed, for ever, and the retry
// loops would wait for a Redis that can never come back.
type redisWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

// watchRedis pings rdb at once and then every redisClosedPoll until ctx
// ends or Stop is called; on redis.ErrClosed it records a
// *configerr.Error on field and calls stop, which ends the process's Run.
// Other errors (Redis down) are left to the process's own retries.
func watchRedis(ctx context.Context, stop func(), field string, rdb redis.UniversalClient) *redisWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &redisWatch{cancel: cancel}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(redisClosedPoll)
		defer t.Stop()
		for {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			err := rdb.Ping(pctx).Err()
			pcancel()
			if errors.Is(err, redis.ErrClosed) {
				w.mu.Lock()
				w.err = &configerr.Error{Op: "kjob", Field: field, Reason: "is closed: every command fails with \"" + err.Error() +
					"\"; close the client only after Run returned", Err: redis.ErrClosed}
				w.mu.Unlock()
				stop()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// Stop ends the watch, waits for its goroutine and returns the error it
// found, if any.
func (w *redisWatch) Stop() error {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// topicSource names the config fields a topic's settings come from, for
// a topic mismatch at Run.
type topicSource struct{ Partitions, ReplicationFactor, Compacted string }

// topicFields returns err, when it holds a *topic.MismatchError about one
// of the topics in by, wrapped so that its configuration fields
// (configerr.Fields) are the config's fields the topic's settings came
// from ("ProducerConfig.Partitions"), not the topic Spec's; any other
// error is returned as it is.
func topicFields(err error, by map[string]topicSource) error {
	var me *topic.MismatchError
	if !errors.As(err, &me) {
		return err
	}
	src, ok := by[me.Topic]
	if !ok {
		return err
	}
	var fields []string
	for _, f := range me.Fields {
		var to string
		switch f {
		case "Spec.Partitions":
			to = src.Partitions
		case "Spec.ReplicationFactor":
			to = src.ReplicationFactor
		case "Spec.Compacted":
			to = src.Compacted
		}
		if to != "" && !slices.Contains(fields, to) {
			fields = append(fields, to)
		}
	}
	return &fieldsError{err: err, fields: fields}
}

// fieldsError is an error about the config fields it lists.
type fieldsError struct {
	err    error
	fields []string
}

func (e *fieldsError) Error() string          { return e.err.Error() }
func (e *fieldsError) Unwrap() error          { return e.err }
func (e *fieldsError) ConfigFields() []string { return e.fields }
