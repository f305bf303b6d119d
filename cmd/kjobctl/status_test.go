package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// With Kafka and Redis down, status exits 1 and shows every part as
// unknown with its error, never a zero or "none" as if it were a fact.
func TestStatusDown(t *testing.T) {
	e, cluster := newOpsEnvCluster(t)
	cluster.Close()
	e.redis.Kill()
	const partial = "kjobctl: status: could not read the producer leader, the group, the jobs, the dead letters, the stalled partitions (the errors are in the output): inspect: parts of the snapshot could not be read"
	// The job list is the schedules topic: with Kafka down no job is
	// known, and the jobs' line says why.
	code, out, stderr := e.kjobctl("status", "--timeout", "5s")
	expect(t, code, stderr, exitError, partial)
	if !strings.Contains(out, "Jobs: partly unknown (job list: read the schedules topic kjob.windows.schedules: ") || strings.Contains(out, "report") {
		t.Errorf("status with Kafka down lists jobs, or does not say the job list is unknown:\n%s", out)
	}
	// With a schedules file (the offline override) the jobs are known,
	// and what Kafka and Redis would tell of them is unknown.
	code, out, stderr = e.kjobctl("status", "--timeout", "5s", "--schedules", e.sched)
	expect(t, code, stderr, exitError, "kjobctl: using the jobs of the schedules file "+e.sched+" (--schedules/KJOB_SCHEDULES), not the schedules topic "+
		"kjob.windows.schedules: jobs created through the API are not seen; unset it to read the topic\n"+partial)
	for _, want := range []string{"Producer leader: unknown (", "Group kjob-workers: unknown (", "Dead letters: unknown (", "Jobs: partly unknown (", "Stalled partitions: unknown ("} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	for _, never := range []string{"none", "does not exist", "Dead letters: 0", "pending"} {
		if strings.Contains(out, never) {
			t.Errorf("status output says %q while Kafka and Redis are down:\n%s", never, out)
		}
	}
	// Both jobs: state, partition and last window unknown.
	for _, job := range []string{"flaky", "report"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, job+" ") {
				line = l
			}
		}
		// ... STATE OVERLAP PART NEXT(date time zone) NEXT(UTC) LAST OUTCOME
		// (the overlap policy comes from the file, so it is known)
		if f := strings.Fields(line); len(f) < 12 || f[len(f)-9] != "unknown" || f[len(f)-8] != "queue" || f[len(f)-7] != "?" || f[len(f)-2] != "?" || f[len(f)-1] != "unknown" {
			t.Errorf("job %s row %q: want STATE unknown, OVERLAP queue, PART ?, LAST WINDOW ?, OUTCOME unknown", job, line)
		}
	}

	// -o json prints what it could read, with the errors, and exits 1 too.
	code, out, _ = e.kjobctl("status", "--timeout", "5s", "-o", "json", "--schedules", e.sched)
	var s inspect.Snapshot
	if code != exitError || json.Unmarshal([]byte(out), &s) != nil || s.LeaderError == "" || s.GroupError == "" || s.DeadLettersError == "" ||
		!s.Jobs[0].PartitionUnknown || !s.Jobs[0].PausedUnknown || !s.Jobs[0].LastUnknown {
		t.Fatalf("status -o json: exit %d\n%s", code, out)
	}
}

// --lease-backend kubernetes reads the producers' coordination.k8s.io
// Lease: holderIdentity, acquireTime, leaseTransitions as the epoch.
func TestStatusKubernetesLease(t *testing.T) {
	e := newOpsEnv(t)
	cl := fake.NewClientset()
	var gotKubeconfig string
	defer func(f func(string) (kubernetes.Interface, string, error)) { newKubeClient = f }(newKubeClient)
	newKubeClient = func(kubeconfig string) (kubernetes.Interface, string, error) {
		gotKubeconfig = kubeconfig
		return cl, "kjob", nil
	}
	code, out, stderr := e.kjobctl("status", "--lease-backend", "kubernetes", "--kubeconfig", "/tmp/kc")
	// No worker runs here: status exits 6 after printing it all.
	if code != exitNoWorker || !strings.Contains(out, "Producer leader: none (no producer holds the kubernetes Lease <kubeconfig namespace>/kjob-producer-ops)\n") || gotKubeconfig != "/tmp/kc" {
		t.Fatalf("status without a Lease: exit %d (kubeconfig %q)\n%s%s", code, gotKubeconfig, out, stderr)
	}
	acquired := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	holder, dur, transitions := "producer-2", int32(15), int32(4)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kjob", Name: "kjob-producer-ops"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, LeaseTransitions: &transitions,
			AcquireTime: &metav1.MicroTime{Time: acquired}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if _, err := cl.CoordinationV1().Leases("kjob").Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KJOB_LEASE_BACKEND", "kubernetes")
	code, out, stderr = e.kjobctl("status")
	want := "Producer leader: producer-2 (lease epoch 4, since " + acquired.Format(time.RFC3339) + ")\n"
	if code != exitNoWorker || !strings.HasPrefix(out, want) {
		t.Fatalf("status: exit %d, want first line %q\n%s%s", code, want, out, stderr)
	}
	code, out, _ = e.kjobctl("status", "-o", "json")
	var s inspect.Snapshot
	if code != exitNoWorker || json.Unmarshal([]byte(out), &s) != nil || s.Leader == nil || s.Leader.Holder != "producer-2" || s.Leader.Epoch != 4 ||
		s.Leader.Source != "kubernetes Lease kjob/kjob-producer-ops" || s.Leader.Expired {
		t.Fatalf("status -o json: exit %d\n%s", code, out)
	}
	// A Lease in another namespace, named explicitly.
	lease.Namespace, lease.Name = "prod", "my-lease"
	if _, err := cl.CoordinationV1().Leases("prod").Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, _ = e.kjobctl("status", "--lease-namespace", "prod", "--lease-name", "my-lease")
	if code != exitNoWorker || !strings.HasPrefix(out, want) {
		t.Fatalf("status --lease-namespace prod --lease-name my-lease: exit %d\n%s", code, out)
	}
	// The API server unreachable: the leader is unknown, status exits 1.
	newKubeClient = func(string) (kubernetes.Interface, string, error) {
		return nil, "", errTest("kubernetes credentials: no configuration has been provided")
	}
	code, out, _ = e.kjobctl("status")
	if code != exitError || !strings.HasPrefix(out, "Producer leader: unknown (kubernetes credentials: no configuration has been provided)\n") {
		t.Fatalf("status without credentials: exit %d\n%s", code, out)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// A partition a worker reports it cannot move is listed with its worker,
// offset, since and reason, and status exits 1 (a lapsed report is not).
func TestStatusShowsStalledPartitions(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	now := time.Now()
	if err := e.store.ReportStalls(ctx, "worker-7", []dedupe.Stall{{Partition: 2, Offset: 41, Window: "report@x", Since: now.Add(-time.Minute), Until: now.Add(time.Minute),
		Reason: "its dead letter cannot be written: TOPIC_AUTHORIZATION_FAILED"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.ReportStalls(ctx, "worker-gone", []dedupe.Stall{{Partition: 0, Offset: 3, Since: now.Add(-time.Hour), Until: now.Add(-time.Minute), Reason: "lapsed"}}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := e.kjobctl("status", "--timeout", "10s")
	expect(t, code, stderr, exitError, "kjobctl: status: 1 partition(s) cannot move (see Stalled partitions)")
	for _, want := range []string{"Stalled partitions: 1", "worker-7", "41", "its dead letter cannot be written: TOPIC_AUTHORIZATION_FAILED"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "worker-gone") {
		t.Errorf("status shows a lapsed stall report:\n%s", out)
	}
	code, out, _ = e.kjobctl("status", "--timeout", "10s", "-o", "json")
	var s inspect.Snapshot
	if code != exitError || json.Unmarshal([]byte(out), &s) != nil || len(s.Stalls) != 1 || s.Stalls[0].Worker != "worker-7" {
		t.Fatalf("status -o json: exit %d\n%s", code, out)
	}
}

// With no worker running, status prints everything and exits 6, saying so;
// once a worker is in the group it exits 0. Before, it exited 0 with no
// worker, so a script or probe could not tell that no window runs.
func TestStatusWithoutWorkerExits6(t *testing.T) {
	e := newOpsEnv(t)
	code, out, stderr := e.kjobctl("status", "--timeout", "10s")
	want := "kjobctl: status: no worker is running in group kjob-workers, so no window runs: start the workers, or check --group/KJOB_GROUP against theirs: no worker\n"
	if code != exitNoWorker || stderr != want || !strings.Contains(out, "Group kjob-workers: ") {
		t.Fatalf("status without a worker: exit %d, stderr %q (want exit 6 and %q)\n%s", code, stderr, want, out)
	}
	var mu sync.Mutex
	failing := false
	e.startWorker(&failing, &mu)
	testenv.Eventually(t, 30*time.Second, func() bool {
		code, _, _ := e.kjobctl("status", "--timeout", "10s")
		return code == exitOK
	}, "status does not exit 0 with a worker running")
}
