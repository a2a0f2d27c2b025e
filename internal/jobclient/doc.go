// Package jobclient is the producer's side of sluice: it reads and
// validates job specs, publishes them to SLUICE_JOBS deduplicated by job id,
// follows jobs to their end through SLUICE_EVENTS and SLUICE_STATE, reads a
// job's state record, requests cancels and tails events; and it is the
// operator's one query API: it lists jobs by their events, reads a job's
// timeline, counts jobs per kind and status, reruns ended jobs as retries
// (X-r<N>) and lists, replays and purges dead letters. The enqueue CLI and
// the web console are thin shells around it, so they give the same answers.
//
// Nothing it prints or returns carries a secret: NATS URLs lose their user
// information, artifact and result URLs lose their query strings, and the
// state record's results (which may be signed URLs) are never exposed.
package jobclient
