#!/usr/bin/env bash
# Builds sluice's local images without pulling anything: every binary is
# compiled on this machine with CGO_ENABLED=0 from Go modules (sluice's own
# commands, and nats-server and versitygw at the versions pinned as Go tool
# dependencies in go.mod), then packed into a FROM scratch image together
# with the host's CA certificates, a minimal /etc/passwd with a non-root
# user (65532) and the health probe (images/probe).
#
# Usage: images/build.sh [worker enqueue simulator nats versitygw]  (default: all)
#
# Environment:
#   SLUICE_IMAGE_TAG  tag of every image (default dev): sluice-<name>:<tag>
#   IMAGES_DIR        where the build contexts go (default dist/images)
#   CA_CERTS          CA bundle copied into the images
#                     (default /etc/ssl/certs/ca-certificates.crt)
#   GO, DOCKER        the go and docker commands
#
# A tool binary (nats-server, versitygw: the slow ones) is rebuilt only when
# its key changes: the Go version plus every module version it is built
# from. sluice's own binaries go through `go build`, whose cache makes an
# unchanged one cost a link at most; Docker's layer cache then keeps an
# unchanged image as it was.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
DOCKER=${DOCKER:-docker}
TAG=${SLUICE_IMAGE_TAG:-dev}
OUT=${IMAGES_DIR:-dist/images}
CA=${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}

NATS_PKG=github.com/nats-io/nats-server/v2
VGW_MOD=github.com/versity/versitygw
VGW_PKG=$VGW_MOD/cmd/versitygw

all=(worker enqueue simulator nats versitygw)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")
for name in "${want[@]}"; do
	case " ${all[*]} " in *" $name "*) ;; *) echo "images/build.sh: unknown image $name (want: ${all[*]})" >&2; exit 2 ;; esac
done

if [ ! -r "$CA" ]; then
	echo "images/build.sh: no CA bundle at $CA (set CA_CERTS)" >&2
	exit 1
fi
arch=$($DOCKER version -f '{{.Server.Arch}}')
export CGO_ENABLED=0 GOOS=linux GOARCH=$arch
version=$(git describe --always --dirty 2>/dev/null || echo dev)

# context NAME: a fresh build context holding the files every image shares.
context() {
	local dir=$OUT/$1
	mkdir -p "$dir/etc/ssl/certs"
	cp -p images/rootfs/etc/passwd images/rootfs/etc/group "$dir/etc/"
	cp -p "$CA" "$dir/etc/ssl/certs/ca-certificates.crt"
	echo "$dir"
}

# tool OUTPUT PACKAGE [LDFLAGS]: builds a pinned tool unless its key is unchanged.
tool() {
	local out=$1 pkg=$2 ldflags=${3:-}
	local key
	key=$({ "$GO" version; echo "$GOOS/$GOARCH $ldflags"; "$GO" list -deps -f '{{with .Module}}{{.Path}}@{{.Version}}{{end}}' "$pkg" | sort -u; } | sha256sum | cut -d' ' -f1)
	if [ -x "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then
		echo "== $pkg: unchanged, not rebuilt"
		return
	fi
	echo "== $pkg: building (a minute or two)"
	"$GO" build -trimpath -ldflags "-s -w $ldflags" -o "$out" "$pkg"
	echo "$key" > "$out.key"
}

# image NAME VERSION: docker build of images/NAME/Dockerfile on its context.
image() {
	echo "== sluice-$1:$TAG"
	local log
	# Quiet unless it fails (the legacy builder's deprecation notice included).
	if ! log=$($DOCKER build -q -f "images/$1/Dockerfile" --build-arg "VERSION=$2" -t "sluice-$1:$TAG" "$OUT/$1" 2>&1 >/dev/null); then
		echo "$log" >&2
		return 1
	fi
}

# The probe and the sluice commands the wanted images hold, in one go build.
bin=$OUT/.bin
mkdir -p "$bin"
pkgs=(./images/probe)
for name in "${want[@]}"; do
	case $name in worker | enqueue | simulator) pkgs+=("./cmd/$name") ;; esac
done
echo "== ${pkgs[*]} ($GOOS/$GOARCH)"
# -buildvcs=auto stamps the commit (worker/enqueue --version, the
# sluice_build_info metric) even where GOFLAGS says -buildvcs=false.
"$GO" build -buildvcs=auto -trimpath -ldflags "-s -w" -o "$bin/" "${pkgs[@]}"

for name in "${want[@]}"; do
	dir=$(context "$name")
	case $name in
	worker)
		cp -p "$bin/worker" "$bin/probe" "$dir/"
		image worker "$version"
		;;
	enqueue)
		cp -p "$bin/enqueue" "$dir/"
		image enqueue "$version"
		;;
	simulator)
		mkdir -p "$dir/cluster"
		cp -p "$bin/simulator" "$bin/probe" "$dir/"
		image simulator "$version"
		;;
	nats)
		mkdir -p "$dir/data" "$dir/etc/nats"
		cp -p config/nats/nats.conf "$dir/etc/nats/nats.conf"
		cp -p "$bin/probe" "$dir/"
		tool "$dir/nats-server" "$NATS_PKG"
		image nats "$("$GO" list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)"
		;;
	versitygw)
		mkdir -p "$dir/data"
		cp -p "$bin/probe" "$dir/"
		v=$("$GO" list -m -f '{{.Version}}' "$VGW_MOD")
		tool "$dir/versitygw" "$VGW_PKG" "-X main.Version=$v -X main.Build=$v -X main.BuildTime=module"
		image versitygw "$v"
		;;
	esac
done
$DOCKER image ls --filter "reference=sluice-*:$TAG" --format '{{.Repository}}:{{.Tag}}  {{.Size}}'
