// Package jobclient is the producer's side of sluice: it reads and
// validates job specs, publishes them to SLUICE_JOBS deduplicated by job id,
// follows jobs to their end through SLUICE_EVENTS and SLUICE_STATE, reads a
// job's state record, requests cancels and tails events. The enqueue CLI is
// a thin shell around it.
//
// Nothing it prints or returns carries a secret: NATS URLs lose their user
// information, artifact and result URLs lose their query strings, and the
// state record's results (which may be signed URLs) are never exposed.
package jobclient
