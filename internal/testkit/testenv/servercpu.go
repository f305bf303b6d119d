package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ServerCPU returns the CPU time, user and system, the Redis server behind
// rdb has used so far (INFO cpu), in µs: a benchmark reads it before and
// after its work to report the server's share of it.
func ServerCPU(tb testing.TB, rdb redis.UniversalClient) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var us float64
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			us += f * 1e6
		}
	}
	return us
}
