package preflight

import (
	"context"
	"errors"
	"testing"
)

// The wordings of ACL refusals the check must recognise and name without
// probing: outside scripts (NOPERM), and inside them from Redis 7.2 on
// (7.0's in-script wording names nothing and is covered against the real
// 7.0 server by TestRedisMissingCommandIsNamed).
func TestMissingNamesWhatRedisSays(t *testing.T) {
	r := RedisRole{KeyPattern: "~kjob:{kjob:*"}
	for _, c := range []struct{ msg, want string }{
		{"NOPERM this user has no permissions to run the 'incrby' command", "+incrby"},
		{"NOPERM User kjob-worker has no permissions to run the 'hset' command", "+hset"},
		{"ERR ACL failure in script: User kjob-worker has no permissions to run the 'hset' command script: 9dc0, on @user_script:38.", "+hset"},
		{"NOPERM this user has no permissions to access one of the keys used as arguments", "access to its keys (~kjob:{kjob:*)"},
		{"ERR ACL failure in script: No permissions to access a key", "access to its keys (~kjob:{kjob:*)"},
		{"ERR The user executing the script can't access at least one of the keys mentioned in the command arguments", "access to its keys (~kjob:{kjob:*)"},
		{"NOPERM this user has no permissions to access one of the channels used as arguments", "access to the channel (&...)"},
	} {
		err := errors.New(c.msg)
		if !isPermissionError(err) {
			t.Errorf("%q: not recognised as a permission error", c.msg)
		}
		if got := r.missing(context.Background(), err); got != c.want {
			t.Errorf("%q: names %q, want %q", c.msg, got, c.want)
		}
	}
	for _, msg := range []string{"dial tcp 127.0.0.1:1: connect: connection refused", "LOADING Redis is loading the dataset in memory", "WRONGPASS invalid username-password pair"} {
		if isPermissionError(errors.New(msg)) {
			t.Errorf("%q taken for a permission error", msg)
		}
	}
}
