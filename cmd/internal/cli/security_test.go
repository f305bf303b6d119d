package cli_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/exec/control"
	"github.com/kjob/kjob/internal/exec/handler"
	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/exec/producer"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/ops/operatorrole"
	"github.com/kjob/kjob/internal/store/access"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/internal/store/lease"
	"github.com/kjob/kjob/internal/store/pause"
	"github.com/kjob/kjob/internal/testkit/testenv"
	"github.com/kjob/kjob/schedule"
)

// Default names, as in deploy/SECURITY.md.
const (
	windows      = "kjob.windows"
	stateTopic   = "kjob.windows.state"
	dlqTopic     = "kjob.windows.dlq"
	controlTopic = "kjob.windows.control"
	epochTopic   = "kjob.windows.epoch"
	group        = "kjob-workers"
	txnID        = "kjob-producer-kjob"
)

// documentedACLs reads the role table of deploy/SECURITY.md: the
// producer's rows (its own and its schedules rows) and the worker's.
func documentedACLs(t *testing.T) map[string][]access.Permission {
	t.Helper()
	rows := testenv.KafkaACLRows(t, filepath.Join("..", "..", "..", "deploy", "SECURITY.md"))
	out := map[string][]access.Permission{
		"producer": append(rows["producer"], rows["producer (schedules)"]...), // schedules as a log: the producer's rows of its own table
		"worker":   rows["worker"],
	}
	if len(out["producer"]) == 0 || len(out["worker"]) == 0 {
		t.Fatalf("deploy/SECURITY.md: no role table rows found: %v", out)
	}
	return out
}

func TestDocumentedACLsMatchCode(t *testing.T) {
	doc := documentedACLs(t)
	if got := access.Producer(windows, stateTopic, txnID); !reflect.DeepEqual(got, doc["producer"]) {
		t.Errorf("producer grants:\ncode %v\ndocs %v", got, doc["producer"])
	}
	if got := access.Worker(windows, dlqTopic, controlTopic, group); !reflect.DeepEqual(got, doc["worker"]) {
		t.Errorf("worker grants:\ncode %v\ndocs %v", got, doc["worker"])
	}
}

var kOps = map[string]kmsg.ACLOperation{
	access.Read: kmsg.ACLOperationRead, access.Write: kmsg.ACLOperationWrite, access.Create: kmsg.ACLOperationCreate,
	access.Describe: kmsg.ACLOperationDescribe, access.DescribeConfigs: kmsg.ACLOperationDescribeConfigs,
}

var kRes = map[string]kmsg.ACLResourceType{
	access.Topic: kmsg.ACLResourceTypeTopic, access.Group: kmsg.ACLResourceTypeGroup, access.TransactionalID: kmsg.ACLResourceTypeTransactionalId,
}

func kfakeACLs(ps []access.Permission) []kfake.ACL {
	out := make([]kfake.ACL, 0, len(ps))
	for _, p := range ps {
		out = append(out, kfake.ACL{Resource: kRes[p.Resource], Name: p.Name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kOps[p.Operation], Allow: true})
	}
	return out
}

// secureCluster starts a kfake broker requiring mutual TLS and SASL, with
// ACLs enforced, a superuser admin and the given users.
func secureCluster(t *testing.T, certs *testenv.Certs, users ...kfake.Opt) []string {
	t.Helper()
	opts := append([]kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.TLS(certs.ServerTLS()),
		kfake.Superuser(cli.SASLScramSHA256, "admin", "admin-secret")}, users...)
	return testenv.Cluster(t, opts...).ListenAddrs()
}

func security(t *testing.T, certs *testenv.Certs, mech, user, pass string) []kgo.Opt {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := cli.KafkaSecurity{
		TLSFiles:      cli.TLSFiles{CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey},
		SASLMechanism: mech, SASLUser: user, SASLPasswordFile: pw,
	}.ClientOpts()
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

func TestKafkaSASLMechanismsOverMutualTLS(t *testing.T) {
	certs := testenv.NewCerts(t)
	describe := kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "t", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true}
	brokers := secureCluster(t, certs,
		kfake.User(cli.SASLPlain, "u-plain", "p1", describe),
		kfake.User(cli.SASLScramSHA256, "u-256", "p2", describe),
		kfake.User(cli.SASLScramSHA512, "u-512", "p3", describe))
	ping := func(opts []kgo.Opt) error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RequestRetries(0)}, opts...)...)
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
		return err
	}
	for _, c := range []struct{ mech, user, pass string }{
		{cli.SASLPlain, "u-plain", "p1"}, {cli.SASLScramSHA256, "u-256", "p2"}, {cli.SASLScramSHA512, "u-512", "p3"},
	} {
		t.Run(c.mech, func(t *testing.T) {
			if err := ping(security(t, certs, c.mech, c.user, c.pass)); err != nil {
				t.Fatalf("%s as %s over mTLS: %v", c.mech, c.user, err)
			}
			if err := ping(security(t, certs, c.mech, c.user, "wrong")); err == nil {
				t.Fatalf("%s as %s with a wrong password was accepted", c.mech, c.user)
			}
		})
	}
	t.Run("no client certificate", func(t *testing.T) {
		opts, err := cli.KafkaSecurity{TLSFiles: cli.TLSFiles{CA: certs.CA}, SASLMechanism: cli.SASLPlain, SASLUser: "u-plain", SASLPassword: "p1"}.ClientOpts()
		if err != nil {
			t.Fatal(err)
		}
		if err := ping(opts); err == nil {
			t.Fatal("a client without a certificate was accepted by a broker requiring mutual TLS")
		}
	})
	t.Run("no TLS", func(t *testing.T) {
		opts, _ := cli.KafkaSecurity{SASLMechanism: cli.SASLPlain, SASLUser: "u-plain", SASLPassword: "p1"}.ClientOpts()
		if err := ping(opts); err == nil {
			t.Fatal("a plaintext client was accepted by a TLS broker")
		}
	})
}

func TestKafkaSecurityFlagErrors(t *testing.T) {
	for _, c := range []struct {
		s    cli.KafkaSecurity
		want string
	}{
		{cli.KafkaSecurity{SASLMechanism: "GSSAPI", SASLUser: "u", SASLPassword: "p"}, `--kafka-sasl-mechanism "GSSAPI"`},
		{cli.KafkaSecurity{SASLMechanism: cli.SASLPlain, SASLPassword: "p"}, "needs --kafka-sasl-user"},
		{cli.KafkaSecurity{SASLUser: "u"}, "--kafka-sasl-mechanism is empty"},
		{cli.KafkaSecurity{SASLMechanism: cli.SASLPlain, SASLUser: "u"}, "exactly one of --kafka-sasl-password"},
		{cli.KafkaSecurity{TLSFiles: cli.TLSFiles{Cert: "c.pem"}}, "set both for mutual TLS"},
		{cli.KafkaSecurity{TLSFiles: cli.TLSFiles{CA: "/nonexistent/ca.pem"}}, `--kafka-tls-ca "/nonexistent/ca.pem"`},
	} {
		_, err := c.s.ClientOpts()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error containing %q", c.s, err, c.want)
		}
	}
}

// The commands granted in deploy/SECURITY.md are the ones the Redis
// access check knows each role needs.
func TestRedisACLsDocumented(t *testing.T) {
	users := testenv.RedisACLUsers(t, filepath.Join("..", "..", "..", "deploy", "SECURITY.md"))
	for user, code := range map[string][]string{"kjob-producer": preflight.RedisProducerCommands, "kjob-worker": preflight.RedisWorkerCommands, "kjob-operator": preflight.RedisOperatorCommands} {
		doc := testenv.RedisACLCommands(users[user])
		if !reflect.DeepEqual(doc, code) {
			t.Errorf("%s: deploy/SECURITY.md grants %v, internal/cli lists %v: keep them equal", user, doc, code)
		}
	}
}

// luaCalls returns the commands the Lua scripts in the Go files of dir
// call (redis.call('X' or redis.pcall('X').
func luaCalls(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]`)
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if c := strings.ToLower(m[1]); !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no redis.call in %s: has the way scripts are written changed?", dir)
	}
	return out
}

// Every command the lease scripts (producer) and the idempotency scripts
// (worker) call is granted to the role in deploy/SECURITY.md, whatever the
// scripts become.
func TestRedisACLsCoverScripts(t *testing.T) {
	users := testenv.RedisACLUsers(t, filepath.Join("..", "..", "..", "deploy", "SECURITY.md"))
	for _, c := range []struct{ user, dir string }{
		{"kjob-producer", filepath.Join("..", "..", "..", "internal", "store", "lease")},
		{"kjob-worker", filepath.Join("..", "..", "..", "internal", "store", "dedupe")},
	} {
		granted := testenv.RedisACLCommands(users[c.user])
		calls := luaCalls(t, c.dir)
		for _, cmd := range calls {
			if !slices.Contains(granted, cmd) {
				t.Errorf("the scripts in %s call %s, which deploy/SECURITY.md does not grant %s: add +%s to its ACL SETUSER line (and to internal/cli)", c.dir, strings.ToUpper(cmd), c.user, cmd)
			}
		}
		t.Logf("%s: scripts call %v", c.user, calls)
	}
}

func redisClient(t *testing.T, certs *testenv.Certs, addr, user, pass string) cli.RedisOptions {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pw, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cli.RedisOptions{URL: "rediss://" + user + "@" + addr + "/0", Security: cli.RedisSecurity{
		TLSFiles: cli.TLSFiles{CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey}, PasswordFile: pw,
	}}
}

// TestRolesRunWithDocumentedGrants runs a producer and a worker against a
// broker that enforces mutual TLS, SCRAM and ACLs, each principal holding
// exactly its documented grants, and a redis-server that accepts only TLS
// and the documented ACL users (their ACL SETUSER lines, verbatim); records
// are signed and verification is required. Both Redis access checks must
// pass, a window must be published and run, the worker's control agent
// must apply a seek request, and an unsigned record must reach the
// dead-letter topic.
func TestRolesRunWithDocumentedGrants(t *testing.T) {
	certs := testenv.NewCerts(t)
	doc := documentedACLs(t)
	brokers := secureCluster(t, certs,
		kfake.User(cli.SASLScramSHA512, "kjob-producer", "producer-secret", kfakeACLs(doc["producer"])...),
		kfake.User(cli.SASLScramSHA256, "kjob-worker", "worker-secret", kfakeACLs(doc["worker"])...))
	users := testenv.RedisACLUsers(t, filepath.Join("..", "..", "..", "deploy", "SECURITY.md"))
	redisAddr := testenv.NewRedisTLS(t, certs, testenv.RedisACLUser(users, "kjob-producer"), testenv.RedisACLUser(users, "kjob-worker"), testenv.RedisACLUser(users, "kjob-operator"))
	logs := testenv.NewLogBuffer(t)
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	keysDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(keysDir, "k1"), []byte("0123456789abcdef0123456789abcdef-test-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sign, err := cli.SigningOptions{KeysDir: keysDir, KeyID: "k1"}.Signer()
	if err != nil {
		t.Fatal(err)
	}
	verify, err := cli.SigningOptions{KeysDir: keysDir, Required: true}.Verifier()
	if err != nil {
		t.Fatal(err)
	}

	// Producer, with the pause list of older versions that cmd/producer
	// always wires (HGETALL, HDEL: the leader migrates it into the spec).
	pOpts := security(t, certs, cli.SASLScramSHA512, "kjob-producer", "producer-secret")
	if err := preflight.CheckKafkaAccess(ctx, log, brokers, pOpts, access.Producer(windows, stateTopic, txnID)); err != nil {
		t.Fatalf("producer access check with the documented grants: %v", err)
	}
	prdbOpts := redisClient(t, certs, redisAddr, "kjob-producer", "kjob-producer-pw")
	prdb, err := prdbOpts.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer prdb.Close()
	prole, err := preflight.ProducerRedisRole(prdb, prdbOpts.User(), "kjob", "p1", names.Deployment{Namespace: "kjob"}.LeaseKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := preflight.CheckRedisAccess(ctx, log, prole); err != nil {
		t.Fatalf("producer Redis access check with the documented user: %v", err)
	}
	lock, err := lease.NewRedisLock(prdb, names.Deployment{Namespace: "kjob"}.LeaseKey())
	if err != nil {
		t.Fatal(err)
	}
	el, err := lease.NewElector(lease.Config{Lock: lock, Holder: "p1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	pauses, err := pause.New(prdb, "kjob")
	if err != nil {
		t.Fatal(err)
	}
	file, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: tick\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{Brokers: brokers, ClientOpts: pOpts, TransactionalID: txnID, Jobs: file.Jobs, Elector: el,
		LegacyPauses: pauses, Logger: log, Sign: sign.Sign})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	runCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); errs <- p.Run(runCtx) }()
	testenv.Eventually(t, 30*time.Second, func() bool { return p.Status().Leading }, "producer leads (lease on TLS Redis as kjob-producer)")

	// Worker.
	wOpts := security(t, certs, cli.SASLScramSHA256, "kjob-worker", "worker-secret")
	if err := preflight.CheckKafkaAccess(ctx, log, brokers, wOpts, access.Worker(windows, dlqTopic, controlTopic, group)); err != nil {
		t.Fatalf("worker access check with the documented grants: %v", err)
	}
	wrdbOpts := redisClient(t, certs, redisAddr, "kjob-worker", "kjob-worker-pw")
	wrdb, err := wrdbOpts.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer wrdb.Close()
	wrole, err := preflight.WorkerRedisRole(wrdb, wrdbOpts.User(), "kjob", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := preflight.CheckRedisAccess(ctx, log, wrole); err != nil {
		t.Fatalf("worker Redis access check with the documented user: %v", err)
	}
	store, err := dedupe.New(wrdb, dedupe.Config{Namespace: "kjob"})
	if err != nil {
		t.Fatal(err)
	}
	// An unsigned window, written by a principal that may write the topic
	// but does not hold the signing key: it must be dead-lettered.
	unsigned := jobmsg.ManualID("tick", time.Now(), "unsigned")
	var mu sync.Mutex
	ran := map[string]bool{}
	var failures []string
	type at struct {
		p int32
		o int64
	}
	deadLettered := map[at]bool{} // an unverified record has no window id
	mux := handler.NewMux()
	mux.HandleFunc("tick", func(ctx context.Context, j *handler.Job) error {
		mu.Lock()
		ran[j.ID()] = true
		mu.Unlock()
		return nil
	})
	w, err := worker.New(worker.Config{
		Brokers: brokers, ClientOpts: wOpts, Topic: windows, Group: group, Store: store, Handler: mux,
		WorkerID: "w1", Logger: log, Verify: verify.Verify,
		OnExecuted: func(e worker.Execution) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case e.Outcome == worker.OutcomeDeadLettered && (e.WindowID == "" || e.WindowID == unsigned):
				deadLettered[at{e.Partition, e.Offset}] = true
			case e.Outcome != worker.OutcomeDone && e.Outcome != worker.OutcomeSkippedDone:
				failures = append(failures, e.WindowID+": "+e.Outcome+": "+errString(e.Err))
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); errs <- w.Run(runCtx) }()
	// The control agent, as cmd/worker starts it, as the worker principal.
	agent, err := control.NewAgent(control.AgentConfig{Brokers: brokers, ClientOpts: wOpts, Group: group, Topic: windows,
		Member: "w1", Seeker: w, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); errs <- agent.Run(runCtx) }()
	testenv.Eventually(t, 40*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) >= 2
	}, "the worker runs signed windows with only its documented grants")

	// kjobctl and the dashboard, as the documented kjob-operator user:
	// their check passes, and they read what the worker wrote.
	ordbOpts := redisClient(t, certs, redisAddr, "kjob-operator", "kjob-operator-pw")
	ordb, err := ordbOpts.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer ordb.Close()
	orole, err := operatorrole.RedisRole(ordb, ordbOpts.User(), "kjob", "o1", names.Deployment{Namespace: "kjob"}.LeaseKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := preflight.CheckRedisAccess(ctx, log, orole); err != nil {
		t.Fatalf("operator Redis access check with the documented user: %v", err)
	}
	ostore, err := dedupe.New(ordb, dedupe.Config{Namespace: "kjob"})
	if err != nil {
		t.Fatal(err)
	}
	var ranIDs []string
	mu.Lock()
	for id := range ran {
		ranIDs = append(ranIDs, id)
	}
	mu.Unlock()
	states, err := ostore.States(ctx, ranIDs)
	if err != nil || len(states) == 0 {
		t.Fatalf("the operator reads the states of %v: %v, %v", ranIDs, states, err)
	}

	// The operator side (here the superuser, as kjobctl would be with its
	// own principal) asks the agent to move the worker's partitions back
	// to the start; the agent seeks and commits as the worker principal
	// and acknowledges on the control topic.
	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, security(t, certs, cli.SASLScramSHA256, "admin", "admin-secret")...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	seekThroughAgent(t, ctx, adm, w)

	rec, err := jobmsg.Record(windows, &jobmsg.Message{
		ID: unsigned, Job: "tick", Handler: "tick", Window: jobmsg.Window{Start: time.Now().UTC(), End: time.Now().UTC().Add(time.Second)},
		ScheduledAt: time.Now().UTC(), PublishedAt: time.Now().UTC(), Trigger: jobmsg.TriggerManual, Payload: []byte("{}"),
		Policy: jobmsg.Policy{Timeout: jobmsg.Duration(time.Minute), MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return deadLettered[at{rec.Partition, rec.Offset}]
	}, "the worker dead-letters the unsigned window %s (partition %d offset %d)", unsigned, rec.Partition, rec.Offset)
	dlq, err := kgo.NewClient(append(adm.Opts(), kgo.ConsumeTopics(dlqTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	found := false
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
	for !found && dctx.Err() == nil {
		dlq.PollFetches(dctx).EachRecord(func(r *kgo.Record) {
			found = found || strings.Contains(string(r.Value), unsigned)
		})
	}
	dcancel()
	if !found {
		t.Errorf("no record of %s on %s within 20s", unsigned, dlqTopic)
	}
	mu.Lock()
	if ran[unsigned] {
		t.Errorf("the unsigned window %s ran", unsigned)
	}
	mu.Unlock()

	stop()
	wg.Wait()
	for range 3 {
		if err := <-errs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("windows that did not succeed: %v", failures)
	}
	if l := logs.String(); strings.Contains(l, "lacks") || strings.Contains(l, "NOPERM") || strings.Contains(l, "TOPIC_AUTHORIZATION") || strings.Contains(l, "GROUP_AUTHORIZATION") {
		t.Errorf("permission problems logged with the documented grants:\n%s", l)
	}
}

// seekThroughAgent writes seek requests for every partition w owns (to
// offset 0) until the agent acknowledges one, then checks the committed
// offsets moved. Requests are re-sent: the agent reads the control topic
// only from its end as of when it started.
func seekThroughAgent(t *testing.T, ctx context.Context, adm *kgo.Client, w *worker.Worker) {
	t.Helper()
	offsets := map[int32]int64{}
	for _, p := range w.Assigned() {
		offsets[p] = 0
	}
	if len(offsets) == 0 {
		t.Fatal("the worker owns no partition")
	}
	kadmCl := kadm.NewClient(adm)
	testenv.Eventually(t, 30*time.Second, func() bool {
		ts, err := kadmCl.ListTopics(ctx, controlTopic)
		return err == nil && ts.Has(controlTopic)
	}, "the control agent creates %s as the worker principal", controlTopic)
	acks, err := kgo.NewClient(append(adm.Opts(), kgo.ConsumeTopics(controlTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer acks.Close()
	deadline := time.Now().Add(40 * time.Second)
	for acked := map[int32]bool{}; len(acked) < len(offsets); {
		if time.Now().After(deadline) {
			t.Fatalf("no seek acknowledged by the control agent within 40s (acked %v of %v)", acked, offsets)
		}
		req := &control.SeekRequest{ID: fmt.Sprintf("test-%d", time.Now().UnixNano()), Group: group, Topic: windows, Offsets: offsets, IssuedBy: "test", IssuedAt: time.Now().UTC()}
		rec, err := req.Record(controlTopic)
		if err != nil {
			t.Fatal(err)
		}
		if err := adm.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		for pctx.Err() == nil && len(acked) < len(offsets) {
			acks.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
				if control.Kind(r) != control.KindSeekAck {
					return
				}
				a, err := control.ParseSeekAck(r)
				if err != nil || a.RequestID != req.ID {
					return
				}
				if a.Error != "" || a.Member != "w1" {
					t.Errorf("seek ack %+v: want no error, member w1", a)
				}
				acked[a.Partition] = true
			})
		}
		cancel()
	}
	t.Logf("the control agent applied a seek to %v as the worker principal", offsets)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestMissingGrantIsNamed removes each documented grant in turn and checks
// that the start-up check refuses, naming exactly that grant.
func TestMissingGrantIsNamed(t *testing.T) {
	certs := testenv.NewCerts(t)
	doc := documentedACLs(t)
	topicsOf := map[string][]string{"producer": {windows, stateTopic, windows + ".schedules", windows + ".schedules.log", controlTopic}, "worker": {windows, dlqTopic, controlTopic, epochTopic}}
	for _, role := range []string{"producer", "worker"} {
		for i, drop := range doc[role] {
			t.Run(role+"/"+drop.String(), func(t *testing.T) {
				grants := append(append([]access.Permission(nil), doc[role][:i]...), doc[role][i+1:]...)
				brokers := secureCluster(t, certs, kfake.User(cli.SASLScramSHA256, "u", "pw", kfakeACLs(grants)...))
				// The operator created the topics, except the one whose
				// Create grant is under test.
				adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, security(t, certs, cli.SASLScramSHA256, "admin", "admin-secret")...)...)
				if err != nil {
					t.Fatal(err)
				}
				defer adm.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				for _, tp := range topicsOf[role] {
					if drop.Operation == access.Create && drop.Name == tp {
						continue
					}
					if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, tp); err != nil {
						t.Fatal(err)
					}
				}
				need := access.Producer(windows, stateTopic, txnID)
				if role == "worker" {
					need = access.Worker(windows, dlqTopic, controlTopic, group)
				}
				log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
				err = preflight.CheckKafkaAccess(ctx, log, brokers, security(t, certs, cli.SASLScramSHA256, "u", "pw"), need)
				var me *access.MissingError
				if !errors.Is(err, access.ErrMissing) || !errors.As(err, &me) {
					t.Fatalf("without %v: got %v, want an error wrapping access.ErrMissing", drop, err)
				}
				if !reflect.DeepEqual(me.Missing, []access.Permission{drop}) {
					t.Fatalf("without %v: missing %v, want exactly the dropped grant", drop, me.Missing)
				}
				if !strings.Contains(err.Error(), drop.String()) {
					t.Fatalf("error %q does not name %v", err, drop)
				}
				t.Logf("refused as expected: %v", err)
			})
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
