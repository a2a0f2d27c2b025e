// Package contract holds the NATS names of sluice's public contract
// (docs/producing.md) and creates the streams, consumers and key-value
// bucket they name. Producers, the worker and the enqueue CLI all take their
// names from here, so the contract is spelled in one place.
package contract

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Stream, bucket and subject names (docs/producing.md).
const (
	JobsStream          = "SLUICE_JOBS"
	JobsSubjectPrefix   = "sluice.jobs."
	EventsStream        = "SLUICE_EVENTS"
	EventsSubjectPrefix = "sluice.events."
	StateBucket         = "SLUICE_STATE"
	// SpecsBucket keeps each job's spec as received, key = job id, for as
	// long as its state record: a retry needs only the id
	// (docs/cli.md#enqueue-retry).
	SpecsBucket = "SLUICE_SPECS"
	// TenantsBucket holds the operators' settings per tenant, the price
	// table and the budget ledger (docs/tenants.md).
	TenantsBucket = "SLUICE_TENANTS"
	// KeysBucket holds the HTTP API's keys (as hashes), which tenant
	// each API-submitted job belongs to and the idempotency keys
	// (docs/http-api.md).
	KeysBucket       = "SLUICE_KEYS"
	DLQStream        = "SLUICE_DLQ"
	DLQSubjectPrefix = "sluice.dlq."
	CancelSubject    = "sluice.control.cancel"
	// AliveSubjectPrefix: a worker holding fleet quota leases answers
	// requests on AliveSubject(its name) while its NATS connection is up,
	// so that the others learn of its death from the server's "no
	// responders" (docs/lifecycle.md#a-workers-death).
	AliveSubjectPrefix = "sluice.control.alive."
	// WebhooksBucket holds the webhook subscriptions and the tenants'
	// notify secrets; RecordsBucket one record per delivery, kept as long
	// as events are (docs/webhooks.md).
	WebhooksBucket = "SLUICE_WEBHOOKS"
	RecordsBucket  = "SLUICE_WEBHOOK_RECORDS"
	// DeliveriesStream is the work queue of webhook deliveries, one
	// message per event and destination, on DeliverySubjectPrefix+<sub>.
	DeliveriesStream      = "SLUICE_WEBHOOK_DELIVERIES"
	DeliverySubjectPrefix = "sluice.webhooks.deliver."
	// WebhooksEventsConsumer is the durable consumer of SLUICE_EVENTS that
	// fans each event out into deliveries; WebhooksSendConsumer the one
	// of DeliveriesStream that sends them.
	WebhooksEventsConsumer = "sluice-webhooks"
	WebhooksSendConsumer   = "sluice-webhooks-send"
)

// AliveSubject is the subject worker answers on while it is connected:
// its name with every character a subject token cannot hold (or that
// would make it hard to type) replaced by "_".
func AliveSubject(worker string) string {
	token := []byte(worker)
	for i, c := range token {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			token[i] = '_'
		}
	}
	return AliveSubjectPrefix + string(token)
}

// Message headers of the contract.
const (
	HeaderMsgID = "Nats-Msg-Id"
	HeaderError = "Sluice-Error"
	HeaderJobID = "Sluice-Job-Id"
	// HeaderWorker names the worker that published an event (an addition
	// to the contract's headers: the event's JSON is unchanged).
	HeaderWorker = "Sluice-Worker"
	// CloudEventsContentType is the Content-Type header of every event.
	CloudEventsContentType = "application/cloudevents+json"
)

// Kinds lists the job kinds in their canonical order.
var Kinds = []string{"video", "speech", "compute", "container", "pipeline"}

// LabelRetryOf is the label a retry carries: the id of the job it runs
// again (docs/cli.md#enqueue-retry). A pipeline's retry reuses the
// succeeded steps of the run this label names.
const LabelRetryOf = "retry_of"

// LabelPipeline is the label of a pipeline's step: the pipeline's id.
const LabelPipeline = "pipeline"

// KindUnknown is the kind of a job message that names none of Kinds, in
// its subject or its spec: its failed event and dead letter go to
// sluice.events.unknown.failed and sluice.dlq.unknown.
const KindUnknown = "unknown"

// JobSubject is the subject a job spec of kind is published to.
func JobSubject(kind string) string { return JobsSubjectPrefix + kind }

// ConsumerName is the durable pull consumer that serves kind.
func ConsumerName(kind string) string { return "sluice-" + kind }

// EventSubject is the subject of an event with the given kind and status.
func EventSubject(kind, status string) string {
	return EventsSubjectPrefix + kind + "." + status
}

// DLQSubject is the subject a dead-lettered message of kind is copied to.
func DLQSubject(kind string) string { return DLQSubjectPrefix + kind }

// EventID is the CloudEvents id (and Nats-Msg-Id) of a job's event.
func EventID(jobID, status string) string { return jobID + "." + status }

// KindOfSubject returns the last token of a jobs subject ("video" for
// "sluice.jobs.video"), or an error when subject is not under the jobs
// prefix with exactly one more token.
func KindOfSubject(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, JobsSubjectPrefix)
	if !ok || rest == "" || strings.Contains(rest, ".") {
		return "", fmt.Errorf("subject %q is not %s<kind>", subject, JobsSubjectPrefix)
	}
	return rest, nil
}

// KindOfMessage returns the kind a job message belongs to, also when it
// was published to a subject no consumer serves (sluice.jobs.vidoe,
// sluice.jobs.speech.extra): the kind of the subject's first token after
// sluice.jobs. when that is one of Kinds, else the spec's "kind" when that
// is one of Kinds, else KindUnknown.
func KindOfMessage(subject string, data []byte) string {
	rest, _ := strings.CutPrefix(subject, JobsSubjectPrefix)
	if first, _, _ := strings.Cut(rest, "."); slices.Contains(Kinds, first) {
		return first
	}
	var spec struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &spec) == nil && slices.Contains(Kinds, spec.Kind) {
		return spec.Kind
	}
	return KindUnknown
}

// Served reports whether subject is the subject of one of Kinds, a tenant
// subject of one (TenantSubject) or a class queue of one (ClassSubject),
// the only subjects of SLUICE_JOBS that a consumer delivers.
func Served(subject string) bool {
	if _, ok := ParseClassSubject(subject); ok {
		return true
	}
	_, ok := IntakeKind(subject)
	return ok
}
