package preflight_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/ops/operatorrole"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// aclServer starts a real redis-server (ACL users need one) and returns
// its address and a client of its default, all-powerful user.
func aclServer(t *testing.T) (string, *redis.Client) {
	t.Helper()
	r := testenv.NewRedis(t)
	if !r.Real() {
		t.Skip("ACL users need a real redis-server; miniredis has none (CI sets KJOB_TEST_REQUIRE_REDIS=1 and never gets here)")
	}
	return r.Addr, r.Client()
}

// setUser creates user name with the ACL SETUSER arguments line, and
// returns a client logged in as it.
func setUser(t *testing.T, admin *redis.Client, addr, name, line string) redis.UniversalClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := []any{"acl", "setuser", name, "reset"}
	for _, f := range strings.Fields(line) {
		args = append(args, f)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s %s: %v", name, line, err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Username: name, Password: name + "-pw", MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// without returns the documented line of user with the test password and
// without +command.
func without(users map[string]string, user, command string) string {
	line := strings.TrimPrefix(testenv.RedisACLUser(users, user), user+" ")
	var out []string
	for _, f := range strings.Fields(line) {
		if f != "+"+command {
			out = append(out, f)
		}
	}
	return strings.Join(out, " ")
}

func checkRole(t *testing.T, role string, rdb redis.UniversalClient, user string, log *slog.Logger) error {
	t.Helper()
	var r preflight.RedisRole
	var err error
	switch role {
	case "producer":
		r, err = preflight.ProducerRedisRole(rdb, user, "kjob", "p1", names.Deployment{Namespace: "kjob"}.LeaseKey())
	case "operator":
		r, err = operatorrole.RedisRole(rdb, user, "kjob", "o1", names.Deployment{Namespace: "kjob"}.LeaseKey())
	default:
		r, err = preflight.WorkerRedisRole(rdb, user, "kjob", "w1")
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return preflight.CheckRedisAccess(ctx, log, r)
}

// TestRedisMissingCommandIsNamed takes each command out of a role's
// documented ACL user in turn: the start-up check must stop with an error
// that names exactly that command and points at deploy/SECURITY.md, except
// for the commands the role works without (a warning names those).
func TestRedisMissingCommandIsNamed(t *testing.T) {
	addr, admin := aclServer(t)
	users := testenv.RedisACLUsers(t, filepath.Join("..", "..", "..", "deploy", "SECURITY.md"))
	// The role works without these: go-redis falls back from HELLO to
	// AUTH, and standbys poll the lease without release announcements or
	// the lease's remaining time (PTTL).
	optional := map[string][]string{"producer": {"hello", "publish", "subscribe", "pttl"}, "worker": {"hello", "info"}, "operator": {"hello"}}
	for _, role := range []string{"producer", "worker", "operator"} {
		user := "kjob-" + role
		for _, cmd := range testenv.RedisACLCommands(users[user]) {
			t.Run(role+"/-"+cmd, func(t *testing.T) {
				rdb := setUser(t, admin, addr, user, without(users, user, cmd))
				logs := testenv.NewLogBuffer(t)
				err := checkRole(t, role, rdb, user, slog.New(slog.NewTextHandler(logs, nil)))
				if slices.Contains(optional[role], cmd) {
					if err != nil {
						t.Fatalf("without +%s: %v, want the check to pass", cmd, err)
					}
					if cmd != "hello" && !strings.Contains(logs.String(), "missing=+"+cmd) {
						t.Errorf("without +%s: no warning naming it; log:\n%s", cmd, logs.String())
					}
					return
				}
				if !errors.Is(err, preflight.ErrRedisPermission) {
					t.Fatalf("without +%s: %v, want an error wrapping preflight.ErrRedisPermission", cmd, err)
				}
				for _, want := range []string{`redis: permission missing: user "` + user + `" lacks +` + cmd + `, which`, "deploy/SECURITY.md"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("without +%s: error %q does not contain %q", cmd, err, want)
					}
				}
				t.Logf("refused as expected: %v", err)
			})
		}
	}
	t.Run("worker/wrong keys", func(t *testing.T) {
		line := strings.Replace(without(users, "kjob-worker", ""), "~kjob:{kjob:*", "~other:*", 1)
		rdb := setUser(t, admin, addr, "kjob-worker", line)
		err := checkRole(t, "worker", rdb, "kjob-worker", slog.New(slog.DiscardHandler))
		if !errors.Is(err, preflight.ErrRedisPermission) || !strings.Contains(err.Error(), "lacks access to its keys (~kjob:{kjob:*)") {
			t.Fatalf("with keys ~other:*: %v, want an error naming the key pattern", err)
		}
	})
	t.Run("documented users pass", func(t *testing.T) {
		for _, role := range []string{"producer", "worker", "operator"} {
			user := "kjob-" + role
			rdb := setUser(t, admin, addr, user, without(users, user, ""))
			logs := testenv.NewLogBuffer(t)
			if err := checkRole(t, role, rdb, user, slog.New(slog.NewTextHandler(logs, nil))); err != nil {
				t.Errorf("%s: %v", role, err)
			}
			if strings.Contains(logs.String(), "lacks") {
				t.Errorf("%s: warnings with the documented user:\n%s", role, logs.String())
			}
		}
	})
}

// While Redis is unreachable the check retries; once ctx ends it returns
// ctx's error, not a permission error.
func TestRedisCheckRetriesWhileUnreachable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	r, err := preflight.WorkerRedisRole(rdb, "default", "kjob", "w1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := preflight.CheckRedisAccess(ctx, slog.New(slog.DiscardHandler), r); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CheckRedisAccess against no server: %v, want context.DeadlineExceeded", err)
	}
}
