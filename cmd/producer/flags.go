package main

// sharedHelp is the producer's own help for shared flags.
var sharedHelp = map[string]string{
	"topic":              "topic to publish windows to",
	"replication-factor": "replication factor of created topics (1 to 32767)",
	"id":                 "this replica's id (lease holder name)",
	"metrics-max-jobs":   `at most this many distinct kjob_job label values; further jobs are counted under kjob_job="other" and in kjob_metrics_job_labels_folded_total`,
}
