// Package tenants holds what operators set per tenant in the
// SLUICE_TENANTS bucket (weights, task caps, budgets), the price table, the
// cost estimates and actual costs made from it, and the budget ledger:
// per tenant and UTC day, the open reservations and the credits spent
// (docs/tenants.md). A View keeps the whole bucket in memory from one
// watch, so a job reads no key of it; a Ledger writes the ledger's day keys
// by compare-and-set (internal/kvcas).
package tenants
