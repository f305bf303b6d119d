package access_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kjob/kjob/internal/store/access"
)

// A worker principal granted Read on the windows topic and the group, but
// nothing on the dead-letter topic, is refused before it starts. Without
// Describe it cannot tell the topic exists, so Create is reported too.
func ExampleCheck() {
	grant := func(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.User("SCRAM-SHA-256", "worker", "pw",
			grant(kmsg.ACLResourceTypeTopic, "kjob.windows", kmsg.ACLOperationRead),
			grant(kmsg.ACLResourceTypeGroup, "kjob-workers", kmsg.ACLOperationRead)),
		kfake.SeedTopics(1, "kjob.windows", "kjob.windows.dlq", "kjob.windows.control"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.SASL(scram.Auth{User: "worker", Pass: "pw"}.AsSha256Mechanism()))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err = access.Check(ctx, cl, access.Worker("kjob.windows", "kjob.windows.dlq", "kjob.windows.control", "kjob-workers"))
	fmt.Println(err)
	// Output:
	// kafka principal lacks Topic "kjob.windows.dlq" Create (kafka-acls --add --allow-principal User:<name> --operation Create --topic kjob.windows.dlq); Topic "kjob.windows.dlq" Write (kafka-acls --add --allow-principal User:<name> --operation Write --topic kjob.windows.dlq); Topic "kjob.windows.control" Create (kafka-acls --add --allow-principal User:<name> --operation Create --topic kjob.windows.control); Topic "kjob.windows.control" Read (kafka-acls --add --allow-principal User:<name> --operation Read --topic kjob.windows.control); Topic "kjob.windows.control" Write (kafka-acls --add --allow-principal User:<name> --operation Write --topic kjob.windows.control); Topic "kjob.windows.epoch" Create (kafka-acls --add --allow-principal User:<name> --operation Create --topic kjob.windows.epoch); Topic "kjob.windows.epoch" Read (kafka-acls --add --allow-principal User:<name> --operation Read --topic kjob.windows.epoch); Topic "kjob.windows.epoch" Write (kafka-acls --add --allow-principal User:<name> --operation Write --topic kjob.windows.epoch); Topic "kjob.windows.epoch" DescribeConfigs (kafka-acls --add --allow-principal User:<name> --operation DescribeConfigs --topic kjob.windows.epoch); deploy/SECURITY.md lists each role's grants
}
