// Package preflight checks, before a kjob process starts its work, that
// every Kafka broker implements the requests the process sends
// (CheckKafkaAPIs, from each broker's ApiVersions answer), and that its
// Kafka principal and its Redis user may do everything the process
// will do: CheckKafkaAccess compares the principal's ACLs with a role's
// grants (internal/store/access), CheckRedisAccess runs each Redis script and command
// of a role once on throwaway keys. A missing permission stops start-up
// with an error naming it, instead of a refusal in the middle of a window.
package preflight
