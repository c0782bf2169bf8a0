#!/usr/bin/env bash
# Builds the REAL Dockerfile with podman and runs `harness once --demo` in the image, as its
# non-root user, with the reports on a mounted volume; checks the exit code and the REPORT on
# the host. No image registry is needed: the two base images the Dockerfile names in its FROM
# lines are made here from Debian packages (debootstrap; the builder gets the host's Rust
# toolchain) and tagged with those names. The crates are vendored on the host, so the cargo
# step of the build is offline; the runtime stage's apt-get reaches the Debian mirror.
#
# Caches (under .cache/docker-test/, gitignored): the .deb files, a private podman store with
# the base images and the build's layers. A second run reuses them.
#
# Runs as root (podman rootful, cgroupfs, no systemd needed). Environment knobs:
#   DEBIAN_MIRROR              (default http://deb.debian.org/debian)
#   HARNESS_DOCKER_STORAGE     podman storage driver (default overlay, vfs on an overlayfs)
#   HARNESS_DOCKER_RUNTIME     OCI runtime (default runc: crun refuses hybrid cgroup hosts)
#   HARNESS_DOCKER_FRESH=1     drop the cached base images and layers first
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache/docker-test
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DRIVER=${HARNESS_DOCKER_STORAGE:-}
RUNTIME=${HARNESS_DOCKER_RUNTIME:-runc}
if [ -z "$DRIVER" ]; then
    mkdir -p "$CACHE"
    # overlay cannot sit on overlayfs (a CI job inside a container): use vfs there.
    case $(stat -f -c %T "$CACHE") in
    overlayfs) DRIVER=vfs ;;
    *) DRIVER=overlay ;;
    esac
fi
IMAGE=localhost/harness:docker-test
NAME=harness-docker-test-$$

T0=$(date +%s)
LAST=
phase() { # prints the time the previous phase took, then names the next one
    local now
    now=$(date +%s)
    [ -z "$LAST" ] || printf '   (%ss)\n' $((now - LAST))
    LAST=$now
    echo "== $*"
}
fail() {
    echo "docker-test: FAIL: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || fail "must run as root (rootful podman; debootstrap needs root)"

phase "tools (Debian packages)"
need=()
command -v podman >/dev/null || need+=(podman)
command -v "$RUNTIME" >/dev/null || need+=("$RUNTIME")
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
        --no-install-recommends "${need[@]}" >/dev/null \
        || { apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
                --no-install-recommends "${need[@]}" >/dev/null; } \
        || fail "cannot install ${need[*]} with apt-get"
fi
podman --version

WORK=$(mktemp -d /tmp/harness-docker-test.XXXXXX)
REPORTS=$WORK/reports
STORE=$CACHE/storage   # one store per driver: a store cannot change its driver
[ "$DRIVER" = overlay ] || STORE=$CACHE/storage-$DRIVER
mkdir -p "$STORE" "$CACHE/debs" "$REPORTS"
# A private store: the cached images live in .cache, nothing touches the machine's own store.
# Its database remembers the run root, so that path is fixed.
RUNROOT=/run/harness-docker-test${STORE#"$CACHE"/storage}
P=(podman --root "$STORE" --runroot "$RUNROOT" --storage-driver "$DRIVER"
    --cgroup-manager cgroupfs --events-backend file --runtime "$RUNTIME")
# Podman's default RLIMIT_NOFILE/NPROC (about a million) are more than a host without
# CAP_SYS_RESOURCE grants, and the runtime then fails with "setrlimit: operation not
# permitted"; ask for at most what this shell has (nproc above 32768 failed on a microVM).
cap() { if [ "$1" = unlimited ] || [ "$1" -gt "$2" ]; then echo "$2"; else echo "$1"; fi; }
NOFILE=$(cap "$(ulimit -Sn)" 65536)
NPROC=$(cap "$(ulimit -Su)" 32768)
LIMITS=(--ulimit "nofile=$NOFILE:$NOFILE" --ulimit "nproc=$NPROC:$NPROC")

LLM_PID=
CHILD=
# Runs a long command in the background and waits, so a signal runs the trap at once
# (bash defers traps until a foreground command ends) and cleanup can stop the command.
interruptible() {
    "$@" &
    CHILD=$!
    local rc=0
    wait "$CHILD" || rc=$?
    CHILD=
    return "$rc"
}
cleanup() {
    local rc=$?
    if [ -n "$CHILD" ]; then
        kill -TERM "$CHILD" 2>/dev/null || true
        wait "$CHILD" 2>/dev/null || true
    fi
    [ -z "$LLM_PID" ] || kill "$LLM_PID" 2>/dev/null || true
    "${P[@]}" rm -f --time 0 "$NAME" >/dev/null 2>&1 || true
    # Working containers a failed build left behind (podman build --force-rm should leave none).
    "${P[@]}" rm -af --time 0 >/dev/null 2>&1 || true
    if command -v buildah >/dev/null; then
        buildah --root "$STORE" --runroot "$RUNROOT" --storage-driver "$DRIVER" \
            rm --all >/dev/null 2>&1 || true
    fi
    "${P[@]}" image prune -f >/dev/null 2>&1 || true
    rm -rf "$WORK" "$CACHE/rootfs" 2>/dev/null || true
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "${HARNESS_DOCKER_FRESH:-0}" = 1 ]; then
    "${P[@]}" system reset -f >/dev/null 2>&1 || true
fi

# The Dockerfile's FROM names: the first stage builds, the last one runs.
mapfile -t FROMS < <(awk 'toupper($1) == "FROM" { print $2 }' Dockerfile)
[ ${#FROMS[@]} -ge 2 ] || fail "Dockerfile: expected a builder and a runtime FROM"
BUILDER_FROM=${FROMS[0]}
RUNTIME_FROM=${FROMS[${#FROMS[@]} - 1]}
suite_of() { # debian:bookworm-slim -> bookworm; rust:1-bookworm -> bookworm
    local tag=${1##*:}
    tag=${tag%-slim}
    echo "${tag##*-}"
}
SUITE=$(suite_of "$RUNTIME_FROM")
[ "$(suite_of "$BUILDER_FROM")" = "$SUITE" ] ||
    fail "builder $BUILDER_FROM and runtime $RUNTIME_FROM are not the same Debian suite"
echo "builder $BUILDER_FROM, runtime $RUNTIME_FROM, suite $SUITE"

phase "a container runs here at all"
# The smallest possible probe, before any slow step: an empty image with one static binary
# would need a registry; use a minbase rootfs instead (cached as the runtime base below).
debootstrap_into() { # DIR [--include=...]
    local dir=$1
    shift
    rm -rf "$dir"
    debootstrap --variant=minbase --cache-dir="$CACHE/debs" "$@" "$SUITE" "$dir" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1 || {
        tail -20 "$WORK/debootstrap.log" >&2
        fail "debootstrap $SUITE from $MIRROR failed"
    }
    # What the official images do: no apt caches, a clean apt list dir.
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
}
if ! "${P[@]}" image exists "$RUNTIME_FROM"; then
    echo "making $RUNTIME_FROM from Debian packages (debootstrap --variant=minbase $SUITE)"
    debootstrap_into "$CACHE/rootfs"
    tar -C "$CACHE/rootfs" -c . | "${P[@]}" import --change 'CMD ["bash"]' - "$RUNTIME_FROM" \
        >"$WORK/import.log" 2>&1 || { cat "$WORK/import.log" >&2; fail "podman import of $RUNTIME_FROM failed"; }
    rm -rf "$CACHE/rootfs"
fi
probe=$("${P[@]}" run --rm --name "$NAME" --network none "${LIMITS[@]}" "$RUNTIME_FROM" \
    sh -c 'echo container-ok' 2>&1) || true
if [ "$probe" != container-ok ]; then
    echo "$probe" >&2
    fail "podman cannot run a container here (runtime $RUNTIME, storage $DRIVER); see above"
fi
echo "podman runs containers (runtime $RUNTIME, storage $DRIVER, cgroupfs)"

phase "builder base $BUILDER_FROM (Debian + the host's Rust toolchain)"
SYSROOT=$(rustc --print sysroot)
TOOLCHAIN=$(rustc --version)
have=$("${P[@]}" image inspect --format '{{ index .Labels "harness.toolchain" }}' \
    "$BUILDER_FROM" 2>/dev/null || true)
if [ "$have" != "$TOOLCHAIN" ]; then
    echo "making $BUILDER_FROM with $TOOLCHAIN"
    debootstrap_into "$CACHE/rootfs" --include=gcc,libc6-dev,ca-certificates,git
    mkdir -p "$CACHE/rootfs/usr/local/rust" "$CACHE/rootfs/usr/local/cargo/bin"
    # The toolchain without its documentation (share/ is docs and man pages).
    for d in bin lib libexec etc; do
        [ -e "$SYSROOT/$d" ] && cp -a "$SYSROOT/$d" "$CACHE/rootfs/usr/local/rust/"
    done
    # Like the official image: CARGO_HOME=/usr/local/cargo, tools on PATH.
    tar -C "$CACHE/rootfs" -c . | "${P[@]}" import \
        --change "ENV CARGO_HOME=/usr/local/cargo" \
        --change "ENV PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change "LABEL harness.toolchain=\"$TOOLCHAIN\"" \
        --change 'CMD ["bash"]' - "$BUILDER_FROM" >"$WORK/import.log" 2>&1 ||
        { cat "$WORK/import.log" >&2; fail "podman import of $BUILDER_FROM failed"; }
    rm -rf "$CACHE/rootfs"
fi
"${P[@]}" run --rm --name "$NAME" --network none "${LIMITS[@]}" "$BUILDER_FROM" \
    sh -c 'cargo --version && cc --version | head -1' || fail "the builder image has no working toolchain"

phase "build context (the project's files, crates vendored)"
CTX=$WORK/context
mkdir -p "$CTX"
# What a user's checkout holds: tracked and untracked-but-not-ignored files.
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -c | tar -C "$CTX" -x
(cd "$CTX" && cargo vendor --locked --versioned-dirs vendor >"$WORK/vendor.log" 2>&1) ||
    fail "cargo vendor failed"
# The build's layer cache keys on the copied files' metadata too: with one fixed mtime, an
# unchanged tree (and the freshly vendored crates) hits the cache on the next run.
find "$CTX" -exec touch -h -d @1 {} +
du -sh "$CTX" | awk '{ print "context " $1 }'

phase "podman build (the real Dockerfile)"
# --network host only for the runtime stage's apt-get: the cargo step is offline.
# The builder stage is built (and tagged) first: an untagged stage image would be pruned
# as dangling at cleanup, and the next run would compile everything again.
for target in build ""; do
    tag=$IMAGE
    [ -z "$target" ] || tag=$IMAGE-$target
    interruptible "${P[@]}" build --network host "${LIMITS[@]}" --force-rm --layers \
        ${target:+--target "$target"} --build-arg CARGO_OFFLINE=1 -t "$tag" \
        -f "$CTX/Dockerfile" "$CTX" >>"$WORK/build.log" 2>&1 || {
        tail -40 "$WORK/build.log" >&2
        fail "podman build of the Dockerfile failed (last lines above)"
    }
done
grep -E 'STEP|COMMIT|Using cache' "$WORK/build.log" | cut -c1-100 | sed 's/^/   /' || true
"${P[@]}" image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$IMAGE"

phase "run: harness once --demo in the image, reports on a volume"
uid=$("${P[@]}" run --rm --name "$NAME" --network none "${LIMITS[@]}" --entrypoint id "$IMAGE" -u)
[ "$uid" != 0 ] || fail "the image runs as root"
chown "$uid" "$REPORTS"
set +e
interruptible "${P[@]}" run --rm --name "$NAME" --network none "${LIMITS[@]}" \
    -v "$CTX/examples/demo:/work/examples/demo:ro" -v "$REPORTS:/work/reports" \
    "$IMAGE" once --demo --config examples/demo/harness.toml \
    >"$WORK/once.out" 2>"$WORK/once.err"
code=$?
set -e
sed 's/^/   stderr: /' "$WORK/once.err" | tail -15
sed 's/^/   stdout: /' "$WORK/once.out"
[ "$code" = 0 ] || fail "harness once --demo exited $code in the container (expected 0)"
printed=$(tail -1 "$WORK/once.out")
case $printed in # relative to the image's WORKDIR /work, or absolute
/*) ;;
*) printed=/work/$printed ;;
esac
case $printed in
/work/reports/REPORT-*.md) ;;
*) fail "stdout's last line is not a REPORT path under the volume: $printed" ;;
esac
host_report=$REPORTS/${printed#/work/reports/}
[ -s "$host_report" ] || fail "the REPORT $printed is not on the host at $host_report"
[ -s "$REPORTS/REPORT-latest.md" ] || fail "no REPORT-latest.md on the host"
owner=$(stat -c %u "$host_report")
[ "$owner" = "$uid" ] || fail "the REPORT is owned by uid $owner, not the image's user $uid"
grep -q 'demo-1' "$host_report" || fail "the REPORT does not name the demo task"
echo "REPORT on the host: $(basename "$host_report") ($(wc -c <"$host_report") bytes, uid $owner)"

phase "run: a live turn in the image against a scripted model on the host (127.0.0.1)"
# The test suite's OpenAI-compatible server, built on the host; the container shares the
# host's network namespace to reach it on 127.0.0.1, and gets the key from its environment.
cargo build --quiet --workspace --bin scripted-llm || fail "cannot build scripted-llm on the host"
LLM_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/scripted-llm
[ -x "$LLM_BIN" ] || fail "no $LLM_BIN after cargo build"
KEY=sk-canary-docker-$$-$RANDOM
cat >"$WORK/script.json" <<'JSON'
[{"type": "tool_call", "id": "c1", "command": "id -u"},
 {"type": "tool_call", "calls": [{"name": "finish", "id": "f1",
   "arguments": {"status": "done", "summary": "# Live\n\nThe bash tool ran in the image."}}]}]
JSON
"$LLM_BIN" --script "$WORK/script.json" --port 0 --models glm-5.3 \
    >"$WORK/llm.out" 2>"$WORK/llm.err" </dev/null &
LLM_PID=$!
for _ in $(seq 100); do
    grep -q '^LISTENING ' "$WORK/llm.out" 2>/dev/null && break
    sleep 0.1
done
LLM_URL=$(sed -n 's/^LISTENING //p' "$WORK/llm.out")
[ -n "$LLM_URL" ] || fail "scripted-llm did not start: $(cat "$WORK/llm.err")"
mkdir -p "$WORK/live"
cat >"$WORK/live/harness.toml" <<TOML
vertical = "docker-live"
work_root = "."
report_dir = "/work/reports"

[litellm]
base_url = "$LLM_URL/v1"
key_ref = "env:HARNESS_LITELLM_KEY"
timeout_secs = 20

[models]
mopac-primary = "glm-5.3"
default_tier = "mopac-primary"

[models.classes]
primary = "mopac-primary"

[tools.bash]
enabled = true
default = "deny"
allow = ["id -u"]

[demo]
id = "live-1"
subject = "docker-test live turn"
prompt = "Say which user you run as."
class = "primary"
TOML
set +e
interruptible "${P[@]}" run --rm --name "$NAME" --network host "${LIMITS[@]}" -e HARNESS_LITELLM_KEY="$KEY" \
    -v "$WORK/live:/work/live:ro" -v "$REPORTS:/work/reports" \
    "$IMAGE" once --demo --config live/harness.toml \
    >"$WORK/live.out" 2>"$WORK/live.err"
code=$?
set -e
sed 's/^/   stderr: /' "$WORK/live.err" | tail -8
[ "$code" = 0 ] || fail "the live harness once --demo exited $code in the container (expected 0)"
live_report=$REPORTS/$(basename "$(tail -1 "$WORK/live.out")")
grep -q 'The bash tool ran in the image' "$live_report" 2>/dev/null ||
    fail "the live REPORT $live_report is missing or lacks the model's reply"
# What the model endpoint saw: the key in the Authorization header, the tool's output.
exec 3<>"/dev/tcp/127.0.0.1/${LLM_URL##*:}"
printf 'GET /_fake/requests HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
seen=$(cat <&3)
exec 3<&-
grep -qF "Bearer $KEY" <<<"$seen" || fail "the endpoint did not receive the key from the container"
grep -qF "\"content\":\"$uid\\n[exit status: 0]\"" <<<"$seen" ||
    fail "the tool result (id -u = $uid) did not reach the endpoint"
if grep -rqF "$KEY" "$REPORTS" "$WORK/live.out" "$WORK/live.err"; then
    fail "the key leaked into a REPORT or the container's output"
fi
echo "live REPORT on the host: $(basename "$live_report"); the key reached the endpoint, masked elsewhere"

phase "done"
echo "docker-test: OK in $(($(date +%s) - T0))s (image $IMAGE, exit code $code, user uid $uid)"
