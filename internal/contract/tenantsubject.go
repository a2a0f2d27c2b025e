package contract

import (
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
)

// Tenant subjects (docs/tenants.md#who-may-act-for-a-tenant): a job
// published on sluice.jobs.<kind>.t.<tenant> is for that tenant, and the
// NATS permissions of the publishing user decide who may act for it. A
// bound tenant's jobs are accepted only from there (or from the HTTP API,
// which publishes there with the worker's credentials).
const tenantToken = "t"

// HeaderTenantSubject is set by the admission on a job's class copy to
// the tenant whose subject the job arrived on, and removed from every
// other copy: a class queue loses the intake's subject, and the header a
// producer may set itself must not speak for a tenant (ArrivedFor).
const HeaderTenantSubject = "Sluice-Tenant-Subject"

// CodeTenantRefused is the error code of a job its tenant refused: the
// tenant is bound and the job did not arrive on its tenant subject, or it
// asks a priority more urgent than the tenant's max priority.
const CodeTenantRefused = "tenant_refused"

// IDPattern is what a job or tenant id matches (docs/job-spec.md#fields-and-rules).
const IDPattern = `^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`

var idPattern = regexp.MustCompile(IDPattern)

// ValidID reports whether id matches IDPattern.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// TenantSubject is the subject a job of kind is published on for tenant:
// sluice.jobs.<kind>.t.<tenant>.
func TenantSubject(kind, tenant string) string {
	return JobSubject(kind) + "." + tenantToken + "." + tenant
}

// TenantsFilter is the subject filter of every tenant subject of kind.
func TenantsFilter(kind string) string { return JobSubject(kind) + "." + tenantToken + ".*" }

// ParseTenantSubject returns the kind and tenant of a tenant subject; ok
// is false for any other subject, or one whose kind is not one of Kinds or
// whose tenant is not a valid id.
func ParseTenantSubject(subject string) (kind, tenant string, ok bool) {
	rest, ok := strings.CutPrefix(subject, JobsSubjectPrefix)
	if !ok {
		return "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || parts[1] != tenantToken || !slices.Contains(Kinds, parts[0]) || !ValidID(parts[2]) {
		return "", "", false
	}
	return parts[0], parts[2], true
}

// IntakeKind returns the kind of a subject producers publish jobs on:
// sluice.jobs.<kind> or a tenant subject of kind. ok is false for any
// other subject (a class queue's among them) or a kind not one of Kinds.
//
// A tenant subject whose tenant is not an id (sluice.jobs.video.t.-x) is
// an intake subject too, of no tenant: the kind consumer's filter takes
// any token, so its job is the consumer's to run as if published on
// sluice.jobs.<kind> (ArrivedFor speaks for no tenant), not a stray the
// sweep hands over as well.
func IntakeKind(subject string) (kind string, ok bool) {
	if rest, ok := strings.CutPrefix(subject, JobsSubjectPrefix); ok {
		parts := strings.Split(rest, ".")
		if len(parts) == 3 && parts[1] == tenantToken && parts[2] != "" && slices.Contains(Kinds, parts[0]) {
			return parts[0], true
		}
	}
	kind, err := KindOfSubject(subject)
	if err != nil || !slices.Contains(Kinds, kind) {
		return "", false
	}
	return kind, true
}

// ArrivedFor is the tenant whose subject a job message arrived on: the
// subject's tenant on a tenant subject, HeaderTenantSubject on a class
// queue (where only the admission publishes: see MarkArrival) when the
// copy's Nats-Msg-Id confirms it, and "" on any other subject, whatever
// its headers say.
func ArrivedFor(subject string, h nats.Header) string {
	if _, tenant, ok := ParseTenantSubject(subject); ok {
		return tenant
	}
	if _, ok := ParseClassSubject(subject); ok {
		tenant := h.Get(HeaderTenantSubject)
		if ValidID(tenant) && h.Get(HeaderMsgID) == ClassMsgID(h.Get(HeaderJobID), tenant) {
			return tenant
		}
	}
	return ""
}

// ClassMsgID is the Nats-Msg-Id of job id's class copy: <id>:q, or
// <id>:q:<tenant> for a job that arrived on tenant's subject. An
// admission before tenant subjects copied every header a producer set
// (HeaderTenantSubject among them) but always set <id>:q, which the
// producer cannot choose: so a copy made by an older worker, in a mixed
// fleet or queued from before an upgrade, speaks for no tenant.
func ClassMsgID(id, arrivedFor string) string {
	if arrivedFor == "" {
		return id + ":q"
	}
	return id + ":q:" + arrivedFor
}

// MarkArrival sets, in the headers h of job id's class copy, the tenant
// whose subject the job arrived on (intake), and removes any such header
// the producer set when the intake is not a tenant subject; it sets the
// copy's HeaderJobID and its Nats-Msg-Id (ClassMsgID) to match.
func MarkArrival(h nats.Header, intake, id string) {
	_, tenant, ok := ParseTenantSubject(intake)
	if ok {
		h.Set(HeaderTenantSubject, tenant)
	} else {
		h.Del(HeaderTenantSubject)
	}
	h.Set(HeaderJobID, id)
	h.Set(HeaderMsgID, ClassMsgID(id, tenant))
}
