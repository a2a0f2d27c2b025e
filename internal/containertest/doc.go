// Package containertest runs sluice on real infrastructure in containers
// (testcontainers-go): a NATS server with JetStream and the Versity S3
// gateway, and the worker image, each on a Docker network of its own per
// test, driven against the upstream simulators served by the test process.
// Its scenarios — every job kind end to end, the NATS container restarted
// while jobs are in flight, the S3 container stopped for 10 s during
// uploads, a worker container killed mid-job — each end with zero lost
// jobs, exactly one terminal event per job and no second paid submission.
//
// The package holds only tests. They need a reachable Docker engine and the
// images that `make images` builds from Go modules (sluice-nats,
// sluice-versitygw, sluice-worker, tagged SLUICE_IMAGE_TAG or dev; SLUICE_NATS_IMAGE,
// SLUICE_S3_IMAGE and SLUICE_WORKER_IMAGE name others). Without either
// they skip, saying why. Nothing is pulled: the reaper container (Ryuk) is
// off, each test removes its containers and network itself, and a missing
// image is a skip, never a pull. TestComposeShUpPassesArguments drives
// images/compose.sh with a stand-in compose and needs neither.
package containertest
