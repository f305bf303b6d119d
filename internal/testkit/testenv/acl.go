package testenv

import (
	"os"
	"strings"
	"testing"

	"github.com/kjob/kjob/internal/store/access"
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

// KafkaACLRows reads the Kafka ACL table of the security document at
// path (deploy/SECURITY.md): the rows of four cells (role | resource |
// name | operation), by role as the first cell spells it ("producer",
// "worker", "producer (schedules)", "writer (schedules)"). It fails the
// test if the file cannot be read or has no such rows.
func KafkaACLRows(tb testing.TB, path string) map[string][]access.Permission {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string][]access.Permission{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 4 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "" || strings.HasPrefix(cells[0], "-") {
			continue // a separator row
		}
		out[cells[0]] = append(out[cells[0]], access.Permission{Resource: cells[1], Name: cells[2], Operation: cells[3]})
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no ACL table rows (role | resource | name | operation) found", path)
	}
	return out
}
