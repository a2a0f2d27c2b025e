package tenants

import (
	"strings"
	"time"
)

// The keys of the SLUICE_TENANTS bucket (docs/tenants.md#the-ledger).
const (
	// TenantKeyPrefix starts the key of a tenant's settings: tenant.<id>.
	TenantKeyPrefix = "tenant."
	// PricesKey holds the price table.
	PricesKey = "prices"
	// SchedulerKey is the marker that fair scheduling is wanted: it is
	// created once, by the first worker or enqueue that meets a job of
	// another tenant than default or another priority than 3.
	SchedulerKey = "scheduler"
	// SpendKeyPrefix starts a ledger day key: spend.<tenant>.<YYYYMMDD>.
	SpendKeyPrefix = "spend."
)

// dayLayout is the date of a ledger day key.
const dayLayout = "20060102"

// TenantKey is the key of tenant's settings.
func TenantKey(tenant string) string { return TenantKeyPrefix + tenant }

// SpendKey is the ledger key of tenant on t's UTC day.
func SpendKey(tenant string, t time.Time) string {
	return SpendKeyPrefix + tenant + "." + t.UTC().Format(dayLayout)
}

// parseSpendKey splits a ledger key into its tenant and day.
func parseSpendKey(key string) (tenant string, day time.Time, ok bool) {
	rest, ok := strings.CutPrefix(key, SpendKeyPrefix)
	if !ok {
		return "", time.Time{}, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", time.Time{}, false
	}
	day, err := time.Parse(dayLayout, rest[i+1:])
	if err != nil {
		return "", time.Time{}, false
	}
	return rest[:i], day, true
}
