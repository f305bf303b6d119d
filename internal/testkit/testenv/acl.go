package testenv

import (
	"os"
	"strings"
	"testing"
)

// RedisACLUsers reads the ACL SETUSER lines of the security document at
// path (deploy/SECURITY.md): user name → the rest of its line ("on
// >PASSWORD resetkeys ..."). It fails the test unless the producer, worker
// and operator users are each documented with a >PASSWORD placeholder.
func RedisACLUsers(tb testing.TB, path string) map[string]string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	users := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "ACL SETUSER ")
		if !ok {
			continue
		}
		name, args, _ := strings.Cut(rest, " ")
		users[name] = args
	}
	for _, u := range []string{"kjob-producer", "kjob-worker", "kjob-operator"} {
		if !strings.Contains(users[u], ">PASSWORD") {
			tb.Fatalf("%s: no ACL SETUSER line for %s with >PASSWORD (found %v)", path, u, users)
		}
	}
	return users
}

// RedisACLUser returns user's documented ACL SETUSER arguments (from
// RedisACLUsers), verbatim but for the password placeholder, which becomes
// user + "-pw".
func RedisACLUser(users map[string]string, user string) string {
	return user + " " + strings.Replace(users[user], ">PASSWORD", ">"+user+"-pw", 1)
}

// RedisACLCommands returns the +commands of an ACL SETUSER line.
func RedisACLCommands(line string) []string {
	var out []string
	for _, f := range strings.Fields(line) {
		if c, ok := strings.CutPrefix(f, "+"); ok {
			out = append(out, c)
		}
	}
	return out
}
