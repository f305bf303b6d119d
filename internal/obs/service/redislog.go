package service

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// RedisLogEvery is how often RedisLogger writes a line of one kind.
const RedisLogEvery = 30 * time.Second

// RedisLogger routes go-redis's own log lines (e.g. "connection pool:
// failed to dial after 5 attempts", written twice a second while Redis is
// down) through log, so they take the process's format (--log-format json
// too) and level (WARN), and rate-limits them: a line of one kind (its
// format string) is written at most once per every, with the count of the
// lines left out since. Install it with redis.SetLogger; kjob's own errors
// already say when Redis cannot be reached.
func RedisLogger(log *slog.Logger, every time.Duration) *RedisLog {
	return &RedisLog{log: log, every: every, now: time.Now, kinds: map[string]*redisLogKind{}}
}

// RedisLog is go-redis's logger (redis.SetLogger) writing through slog.
type RedisLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*redisLogKind // by format string: a few constants of go-redis
}

type redisLogKind struct {
	last       time.Time
	suppressed int
}

// Printf implements go-redis's internal.Logging.
func (l *RedisLog) Printf(ctx context.Context, format string, v ...any) {
	now := l.now()
	l.mu.Lock()
	k := l.kinds[format]
	if k == nil {
		k = &redisLogKind{}
		l.kinds[format] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < l.every {
		k.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := k.suppressed
	k.last, k.suppressed = now, 0
	l.mu.Unlock()
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	attrs := []any{"source", "go-redis"}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed, "every", l.every)
	}
	l.log.WarnContext(ctx, "redis client: "+msg, attrs...)
}
