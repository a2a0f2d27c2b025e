package runner

import (
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

// CodeTenantRefused: the job's tenant is bound and the job did not
// arrive on its tenant subject, or it asks a priority more urgent than
// the tenant's max priority (docs/tenants.md#who-may-act-for-a-tenant).
const CodeTenantRefused = "tenant_refused"

// forTenantSubject applies the rule of a job that arrived on a tenant
// subject for arrivedFor ("" for none) to its spec: a spec without a
// tenant is that tenant's, one naming another is invalid. It returns
// specErr with that problem added.
func forTenantSubject(spec *jobspec.Spec, specErr error, arrivedFor string) error {
	if spec == nil || arrivedFor == "" {
		return specErr
	}
	switch spec.Tenant {
	case "":
		spec.Tenant = arrivedFor
		return specErr
	case arrivedFor:
		return specErr
	}
	p := jobspec.Problem{Path: "tenant", Rule: fmt.Sprintf("must be %s, the tenant of the subject the job arrived on (%s), or left out",
		arrivedFor, contract.TenantSubject("<kind>", arrivedFor))}
	var se *jobspec.Error
	if errors.As(specErr, &se) {
		return &jobspec.Error{Problems: append([]jobspec.Problem{p}, se.Problems...)}
	}
	return &jobspec.Error{Problems: []jobspec.Problem{p}}
}

// refusal is why the job's tenant refuses spec, arrived for arrivedFor,
// from the live settings in SLUICE_TENANTS; "" when it does not, or when
// the spec is invalid (that failure comes first).
func (r *Runner) refusal(spec *jobspec.Spec, specErr error, arrivedFor string) string {
	if r.cfg.Tenants == nil || spec == nil || specErr != nil {
		return ""
	}
	tenant := spec.EffectiveTenant()
	s, ok := r.cfg.Tenants.View().Settings(tenant)
	if !ok {
		return ""
	}
	return s.Refusal(tenant, spec.EffectivePriority(), arrivedFor)
}
