# The test cluster's pinned versions (sourced by scripts/kubernetes/*.sh). Kubernetes' own
# components come from modules/components/go.mod; change both together.
# shellcheck disable=SC2034
K8S_VERSION=v1.34.4
HELM_VERSION=v3.19.0
KUBE_ROUTER_VERSION=v2.1.0
COREDNS_VERSION=v1.15.0
PAUSE_IMAGE=agentd.test/pause:1
COREDNS_IMAGE=agentd.test/coredns:$COREDNS_VERSION
