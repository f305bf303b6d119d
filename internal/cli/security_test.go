package cli_test

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/internal/testenv"
	"github.com/kjob/kjob/pkg/access"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/handler"
	"github.com/kjob/kjob/pkg/lease"
	"github.com/kjob/kjob/pkg/producer"
	"github.com/kjob/kjob/pkg/schedule"
	"github.com/kjob/kjob/pkg/worker"
)

// Default names, as in deploy/SECURITY.md.
const (
	windows      = "kjob.windows"
	stateTopic   = "kjob.windows.state"
	dlqTopic     = "kjob.windows.dlq"
	controlTopic = "kjob.windows.control"
	group        = "kjob-workers"
	txnID        = "kjob-producer-kjob"
)

// documentedACLs reads the role table of deploy/SECURITY.md.
func documentedACLs(t *testing.T) map[string][]access.Permission {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "deploy", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]access.Permission{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(strings.Trim(strings.TrimSpace(sc.Text()), "|"), "|")
		if len(cells) != 4 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] != "producer" && cells[0] != "worker" {
			continue
		}
		out[cells[0]] = append(out[cells[0]], access.Permission{Resource: cells[1], Name: cells[2], Operation: cells[3]})
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

// Documented Redis ACL users (deploy/SECURITY.md), with test passwords.
const (
	redisProducerACL = "kjob-producer on >producer-pw resetkeys ~kjob:{kjob}:* resetchannels &kjob:{kjob}:producer-lease:released -@all +ping +hello +eval +evalsha +get +set +incr +del +pexpire +time +publish +subscribe"
	redisWorkerACL   = "kjob-worker on >worker-pw resetkeys ~kjob:{kjob:* resetchannels -@all +ping +hello +eval +evalsha +hmget +hset +incrby +pexpire +del +time"
)

func TestRedisACLsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{redisProducerACL, redisWorkerACL} {
		doc := strings.Replace(strings.Replace(u, ">producer-pw", ">PASSWORD", 1), ">worker-pw", ">PASSWORD", 1)
		if !strings.Contains(string(b), "ACL SETUSER "+doc) {
			t.Errorf("deploy/SECURITY.md does not document the tested Redis user %q", "ACL SETUSER "+doc)
		}
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
// and the documented ACL users; records are signed and verification is
// required. A window must be published and run.
func TestRolesRunWithDocumentedGrants(t *testing.T) {
	certs := testenv.NewCerts(t)
	doc := documentedACLs(t)
	brokers := secureCluster(t, certs,
		kfake.User(cli.SASLScramSHA512, "kjob-producer", "producer-secret", kfakeACLs(doc["producer"])...),
		kfake.User(cli.SASLScramSHA256, "kjob-worker", "worker-secret", kfakeACLs(doc["worker"])...))
	redisAddr := testenv.NewRedisTLS(t, certs, redisProducerACL, redisWorkerACL)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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

	// Producer.
	pOpts := security(t, certs, cli.SASLScramSHA512, "kjob-producer", "producer-secret")
	if err := cli.CheckKafkaAccess(ctx, log, brokers, pOpts, access.Producer(windows, stateTopic, txnID)); err != nil {
		t.Fatalf("producer access check with the documented grants: %v", err)
	}
	prdb, err := redisClient(t, certs, redisAddr, "kjob-producer", "producer-pw").Client()
	if err != nil {
		t.Fatal(err)
	}
	defer prdb.Close()
	lock, err := lease.NewRedisLock(prdb, "kjob:{kjob}:producer-lease")
	if err != nil {
		t.Fatal(err)
	}
	el, err := lease.NewElector(lease.Config{Lock: lock, Holder: "p1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	file, err := schedule.Parse("s.yaml", []byte("jobs:\n  - name: tick\n    schedule: \"@every 1s\"\n    handler: tick\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := producer.New(producer.Config{Brokers: brokers, ClientOpts: pOpts, TransactionalID: txnID, Jobs: file.Jobs, Elector: el, Logger: log, Sign: sign})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	runCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); errs <- p.Run(runCtx) }()
	testenv.Eventually(t, 30*time.Second, func() bool { return p.Status().Leading }, "producer leads (lease on TLS Redis as kjob-producer)")

	// Worker.
	wOpts := security(t, certs, cli.SASLScramSHA256, "kjob-worker", "worker-secret")
	if err := cli.CheckKafkaAccess(ctx, log, brokers, wOpts, access.Worker(windows, dlqTopic, controlTopic, group)); err != nil {
		t.Fatalf("worker access check with the documented grants: %v", err)
	}
	wrdb, err := redisClient(t, certs, redisAddr, "kjob-worker", "worker-pw").Client()
	if err != nil {
		t.Fatal(err)
	}
	defer wrdb.Close()
	store, err := dedupe.New(wrdb, dedupe.Config{Namespace: "kjob"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ran := map[string]bool{}
	var failures []string
	mux := handler.NewMux()
	mux.HandleFunc("tick", func(ctx context.Context, j *handler.Job) error {
		mu.Lock()
		ran[j.ID()] = true
		mu.Unlock()
		return nil
	})
	w, err := worker.New(worker.Config{
		Brokers: brokers, ClientOpts: wOpts, Topic: windows, Group: group, Store: store, Handler: mux,
		WorkerID: "w1", Logger: log, Verify: verify,
		OnExecuted: func(e worker.Execution) {
			if e.Outcome != worker.OutcomeDone && e.Outcome != worker.OutcomeSkippedDone {
				mu.Lock()
				failures = append(failures, e.Outcome+": "+errString(e.Err))
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); errs <- w.Run(runCtx) }()
	testenv.Eventually(t, 40*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) >= 2
	}, "the worker runs signed windows with only its documented grants")
	stop()
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("windows that did not succeed: %v", failures)
	}
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
	topicsOf := map[string][]string{"producer": {windows, stateTopic}, "worker": {windows, dlqTopic, controlTopic}}
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
				err = cli.CheckKafkaAccess(ctx, log, brokers, security(t, certs, cli.SASLScramSHA256, "u", "pw"), need)
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
