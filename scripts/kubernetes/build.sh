#!/usr/bin/env bash
# Builds the test cluster's programs once into .tools/kubernetes/$K8S_VERSION/bin, from the
# Go module proxy (the pinned versions in versions.sh and modules/components/go.sum) and
# gcc: etcd and Kubernetes' components, Helm, kube-router, CoreDNS and the pause program.
# A build that is there and was made from the same pins is kept (about 20 minutes on two
# cores the first time; Go's caches make a rebuild after a pin change much shorter).
#
#   scripts/kubernetes/build.sh [--force]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/kubernetes/versions.sh
. "$here/versions.sh"
bin="$root/.tools/kubernetes/$K8S_VERSION/bin"
pins=$(cat "$here/versions.sh" "$here/modules/components/go.mod" "$here/modules/components/go.sum" \
  "$here/pause/pause.c" | sha256sum | cut -c1-16)
if [ "${1:-}" != "--force" ] && [ "$(cat "$bin/.pins" 2>/dev/null)" = "$pins" ]; then exit 0; fi
command -v go >/dev/null || {
  echo "build: Go is not installed (the test cluster is built from the Go module proxy); install Go 1.24 or newer" >&2
  exit 1
}
mkdir -p "$bin"
export GOFLAGS="-trimpath -mod=mod" GOTOOLCHAIN=local
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
ld="$ld -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
step() { echo "build: $* ($(date +%T))" >&2; }
step "etcd and Kubernetes $K8S_VERSION (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy)"
(cd "$here/modules/components" && go build -ldflags "$ld" -o "$bin/" ./etcd \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
step "helm $HELM_VERSION"
# What helm's own Makefile sets: its version, and the Kubernetes version it renders for
# when no cluster is asked (the minor of its client-go, 1.34 for helm 3.19).
hl="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for p in lint/rules chartutil; do
  hl="$hl -X helm.sh/helm/v3/pkg/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/$p.k8sVersionMinor=$minor"
done
GOBIN=$bin go install -ldflags "$hl" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
step "kube-router $KUBE_ROUTER_VERSION (its NetworkPolicy firewall only)"
GOBIN=$bin go install -ldflags "-s -w" "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
step "coredns $COREDNS_VERSION (static: it runs in an image of one file)"
CGO_ENABLED=0 GOBIN=$bin go install -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
step "pause"
gcc -static -O2 -s -Wall -Wextra -Werror -o "$bin/pause" "$here/pause/pause.c"
echo "$pins" >"$bin/.pins"
step "done: $bin"
