#!/usr/bin/env bash
# Drives docker-compose.yml for the Makefile's compose-* targets, and
# docker-compose.cluster.yml (the secured three-server NATS cluster) for
# its cluster-* targets when SLUICE_STACK=cluster, with either
# `docker compose` (v2) or the older `docker-compose`.
#
# Usage: images/compose.sh up [SERVICE... FLAGS...] | demo | smoke | down | enqueue ARGS... | COMPOSE-ARGS...
#
#   up     start NATS, versitygw, the simulator and $WORKERS workers
#          (default 1), then wait until every container is healthy;
#          services and flags after it go to compose up, e.g. `up console`
#          starts the console service (its dependencies too), `up --build`;
#          it is always detached (-d is accepted and implied)
#   demo   run the demo (cmd/demo) against the running stack
#   smoke  on a separate, throw-away project: start the stack, enqueue the
#          20 mixed jobs of config/compose/smoke-jobs.ndjson with
#          `enqueue submit -f - --wait`, take the stack down with its
#          volumes; exit non-zero unless every job succeeded
#   down   stop and remove the stack's containers; its volumes stay
#          (DOWN_FLAGS=-v removes them too)
#   enqueue ARGS...
#          the CLI on the stack's network: compose run --rm enqueue ARGS
#          (-T when stdin is not a terminal)
#   anything else is handed to compose on the stack's project with every
#          profile, e.g. `images/compose.sh logs -f worker`, so one command
#          works with docker compose v2 and docker-compose v1 alike
#
# With SLUICE_STACK=cluster the same commands drive the cluster stack
# (project sluice-cluster, smoke project sluice-cluster-smoke): before
# compose runs, the stack's TLS files and NATS passwords are made under
# SLUICE_CLUSTER_DIR (default dist/cluster) unless they exist (certs/ by
# go run ./images/certs, secrets.env with random passwords), and the
# passwords are exported for compose. `demo` then submits the mixed jobs
# of config/compose/smoke-jobs.ndjson as the NATS user producer over TLS
# and lists them (cmd/demo, which needs more than a producer may do, is
# for the single-server stack).
#
# Environment: COMPOSE (the compose command), COMPOSE_PROJECT_NAME (the
# project, as compose itself reads it; COMPOSE_PROJECT is the older
# spelling; default sluice), SLUICE_STACK, SLUICE_CLUSTER_DIR, WORKERS,
# DOWN_FLAGS, SMOKE_PROJECT (default sluice-smoke), SLUICE_IMAGE_TAG (the
# tag of the sluice-* images run, as images/build.sh reads it; default dev),
# SMOKE_JOBS (an NDJSON file of specs), SMOKE_TIMEOUT (default 5m), and the
# variables docker-compose.yml reads (image names, host ports, S3
# credentials).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${COMPOSE:-}" ]; then
	if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"; else COMPOSE=docker-compose; fi
fi
case ${SLUICE_STACK:-single} in
single)
	file=docker-compose.yml default_project=sluice profiles=(--profile sim --profile tools --profile console)
	services=(simulator worker)
	;;
cluster)
	file=docker-compose.cluster.yml default_project=sluice-cluster profiles=(--profile tools)
	services=(worker)
	dir=${SLUICE_CLUSTER_DIR:-dist/cluster}
	mkdir -p "$dir"
	# Absolute, for compose's bind mounts.
	SLUICE_CLUSTER_DIR=$(cd "$dir" && pwd)
	export SLUICE_CLUSTER_DIR
	if [ ! -f "$SLUICE_CLUSTER_DIR/certs/ca.pem" ]; then
		${GO:-go} run ./images/certs -dir "$SLUICE_CLUSTER_DIR/certs"
	fi
	if [ ! -f "$SLUICE_CLUSTER_DIR/secrets.env" ]; then
		(
			umask 077
			for user in PRODUCER WORKER ADMIN; do
				echo "SLUICE_NATS_${user}_PASSWORD=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
			done >"$SLUICE_CLUSTER_DIR/secrets.env"
		)
	fi
	set -a
	# shellcheck disable=SC1091 # made just above
	. "$SLUICE_CLUSTER_DIR/secrets.env"
	set +a
	;;
*)
	echo "images/compose.sh: SLUICE_STACK must be single or cluster, not ${SLUICE_STACK}" >&2
	exit 2
	;;
esac
project=${COMPOSE_PROJECT_NAME:-${COMPOSE_PROJECT:-$default_project}}

# The images compose runs are those images/build.sh built: sluice-<name>
# tagged SLUICE_IMAGE_TAG, unless SLUICE_<NAME>_IMAGE names another. The
# compose files cannot derive one variable from another (docker-compose v1
# has no nested defaults), so it is done here.
for pair in NATS:nats S3:versitygw SIMULATOR:simulator WORKER:worker ENQUEUE:enqueue; do
	var=SLUICE_${pair%%:*}_IMAGE
	export "$var=${!var:-sluice-${pair#*:}:${SLUICE_IMAGE_TAG:-dev}}"
done

# compose ARGS: the compose command on $project with every profile, so that
# down and ps see the simulator, the CLI and the console too.
compose() { $COMPOSE -f "$file" -p "$project" "${profiles[@]}" "$@"; }

# enqueue ARGS: the CLI in a throw-away container on the stack's network.
enqueue() {
	local tty=()
	[ -t 0 ] || tty=(-T)
	compose run --rm "${tty[@]}" enqueue "$@"
}

# wait_healthy: until every running container of the project is healthy
# (2 minutes at most).
wait_healthy() {
	local ids state pending
	for _ in $(seq 60); do
		ids=$(compose ps -q)
		pending=0
		for id in $ids; do
			state=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id")
			case $state in healthy | running) ;; *) pending=1 ;; esac
		done
		if [ -n "$ids" ] && [ $pending = 0 ]; then
			return 0
		fi
		sleep 2
	done
	echo "compose: not every container became healthy:" >&2
	compose ps >&2
	return 1
}

case ${1:-} in
up)
	# What follows up goes to compose up: services (console) and flags
	# (--build); without a service the stack's own start. Always detached.
	shift
	args=() named=false
	for a in "$@"; do
		case $a in
		-d | --detach) ;;
		-*) args+=("$a") ;;
		*) args+=("$a") named=true ;;
		esac
	done
	$named || args+=("${services[@]}")
	compose up -d --scale "worker=${WORKERS:-1}" "${args[@]}"
	wait_healthy
	compose ps
	if [ "${SLUICE_STACK:-single}" = cluster ]; then
		echo "NATS on $(compose port nats-1 4222), $(compose port nats-2 4222) and $(compose port nats-3 4222) (TLS, CA $SLUICE_CLUSTER_DIR/certs/ca.pem; users and passwords in $SLUICE_CLUSTER_DIR/secrets.env), S3 on http://$(compose port s3 7070) (bucket sluice)"
	else
		echo "NATS on nats://127.0.0.1:${SLUICE_NATS_HOST_PORT:-4222}, S3 on http://127.0.0.1:${SLUICE_S3_HOST_PORT:-7070} (bucket sluice)"
	fi
	;;
demo)
	if [ "${SLUICE_STACK:-single}" = cluster ]; then
		enqueue submit -f - --wait --timeout 5m <config/compose/smoke-jobs.ndjson
		enqueue jobs --label suite=compose-smoke </dev/null
		exit
	fi
	AWS_ACCESS_KEY_ID=${SLUICE_S3_ACCESS_KEY:-sluice} AWS_SECRET_ACCESS_KEY=${SLUICE_S3_SECRET_KEY:-sluice-dev-secret} \
		${GO:-go} run ./cmd/demo -nats-url "nats://127.0.0.1:${SLUICE_NATS_HOST_PORT:-4222}" \
		-s3-endpoint "http://127.0.0.1:${SLUICE_S3_HOST_PORT:-7070}" -s3-bucket sluice
	;;
smoke)
	# Its own project, and host ports Docker picks: a stack already running
	# under the default project is left alone.
	project=${SMOKE_PROJECT:-$default_project-smoke}
	export SLUICE_NATS_HOST_PORT="" SLUICE_S3_HOST_PORT="" SLUICE_NATS1_HOST_PORT="" SLUICE_NATS2_HOST_PORT="" SLUICE_NATS3_HOST_PORT=""
	trap 'compose down -v --remove-orphans >/dev/null 2>&1 || true' EXIT
	compose up -d --scale worker=2 "${services[@]}"
	wait_healthy
	rc=0
	enqueue submit -f - --wait --timeout "${SMOKE_TIMEOUT:-5m}" <"${SMOKE_JOBS:-config/compose/smoke-jobs.ndjson}" || rc=$?
	if [ $rc != 0 ]; then
		echo "compose smoke: FAILED (enqueue exit $rc); the workers' last log lines:" >&2
		compose logs --no-color --tail=50 worker >&2 || true
		exit $rc
	fi
	echo "compose smoke: every job succeeded"
	# The documented ways to reach the stack work with this compose: the
	# enqueue subcommand, and the compose command itself on the project
	# named by COMPOSE_PROJECT_NAME. A worker is named by its service and
	# replica, not by its container id.
	id=$(head -n 1 "${SMOKE_JOBS:-config/compose/smoke-jobs.ndjson}" | sed -n 's/.*"id" *: *"\([^"]*\)".*/\1/p')
	status=$(enqueue status "$id" --json </dev/null) || { echo "compose smoke: FAILED: images/compose.sh enqueue status $id" >&2; exit 1; }
	COMPOSE_PROJECT_NAME=$project $COMPOSE -f "$file" --profile tools run --rm -T enqueue status "$id" </dev/null >/dev/null ||
		{ echo "compose smoke: FAILED: COMPOSE_PROJECT_NAME=$project $COMPOSE -f $file run --rm enqueue status $id" >&2; exit 1; }
	case $status in
	*'"worker":"'"$project"[-_]worker[-_][0-9]*) echo "compose smoke: $id ran on $(printf '%s' "$status" | sed -n 's/.*"worker":"\([^"]*\)".*/\1/p')" ;;
	*)
		echo "compose smoke: FAILED: job $id's worker is not named by service and replica: $status" >&2
		exit 1
		;;
	esac
	;;
down)
	# shellcheck disable=SC2086 # DOWN_FLAGS is a list of flags
	compose down --remove-orphans ${DOWN_FLAGS:-}
	;;
enqueue)
	shift
	enqueue "$@"
	;;
"")
	echo "usage: images/compose.sh up [SERVICE... FLAGS...] | demo | smoke | down | enqueue ARGS... | COMPOSE-ARGS..." >&2
	exit 2
	;;
*)
	compose "$@"
	;;
esac
