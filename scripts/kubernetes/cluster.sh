#!/usr/bin/env bash
# A real single-node Kubernetes for the tests, from the components scripts/kubernetes/build.sh
# builds (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy,
# kube-router's NetworkPolicy firewall, CoreDNS) and Debian's containerd, runc and CNI
# plugins. Everything it makes lives under one directory (default .tools/kubernetes/cluster)
# and /run/agentd-kubernetes; its own containerd, never Docker's.
#
#   scripts/kubernetes/cluster.sh up      start (idempotent); prints the kubeconfig's path
#   scripts/kubernetes/cluster.sh down    stop everything it started and remove its Pods
#   scripts/kubernetes/cluster.sh status
#   scripts/kubernetes/cluster.sh load IMAGE...   copy images from Docker into the cluster
#
# Must never: touch the machine's own containerd, Docker's containers or /etc/cni; leave a
# process or a mount behind after `down`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/kubernetes/versions.sh
. "$here/versions.sh"
bin="$root/.tools/kubernetes/$K8S_VERSION/bin"
dir=${AGENTD_K8S_DIR:-$root/.tools/kubernetes/cluster}
run=/run/agentd-kubernetes
sock=$run/containerd.sock
node=agentd-node
log() { echo "cluster: $*" >&2; }

node_ip() {
  ip -4 route get 1.0.0.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1
}

# start NAME CMD...: runs a component in the background, its log in $dir/logs/NAME.log.
start() {
  local name=$1
  shift
  if [ -f "$dir/pids/$name" ] && kill -0 "$(cat "$dir/pids/$name")" 2>/dev/null; then return; fi
  setsid "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/$name"
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds; names WHAT and the log on failure.
wait_for() {
  local what=$1 secs=$2
  shift 2
  local i
  for ((i = 0; i < secs * 2; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  log "$what did not come up within ${secs}s; its log:"
  tail -30 "$dir/logs/$what.log" >&2 || true
  exit 1
}

kubeconfig() { # NAME CERT: a kubeconfig for a client certificate
  cat >"$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentd-test
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$dir/pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$dir/pki/$2.crt", client-key: "$dir/pki/$2.key"}
contexts:
- name: agentd-test
  context: {cluster: agentd-test, user: $2}
current-context: agentd-test
EOF
}

write_configs() {
  local ip=$1
  mkdir -p "$dir/cni" "$dir/logs" "$dir/pids" "$run"
  for c in admin controller-manager scheduler kube-proxy kubelet kube-router; do kubeconfig "$c" "$c"; done
  cat >"$dir/cni/10-agentd.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "agentd-pods", "plugins": [
  {"type": "bridge", "bridge": "agentdk8s0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$dir/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
  cat >"$dir/containerd.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$run/containerd-state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Containers never get a lower OOM score than containerd's own: a machine (or a CI
  # sandbox) may refuse a process lowering its oom_score_adj, which fails every Pod.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      Root = "$run/runc"
EOF
  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$dir/pki/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$dir/pki/kubelet.crt"
tlsPrivateKeyFile: "$dir/pki/kubelet.key"
cgroupDriver: cgroupfs
containerRuntimeEndpoint: "unix://$sock"
failSwapOn: false
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
maxPods: 200
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
resolvConf: /etc/resolv.conf
EOF
}

# The Debian packages the cluster runs on: installed as root with apt-get, else named.
ensure_packages() {
  local missing=() line path pkg
  for line in containerd:/usr/bin/containerd runc:/usr/sbin/runc \
    containernetworking-plugins:/usr/lib/cni/bridge conntrack:/usr/sbin/conntrack \
    ipset:/usr/sbin/ipset iptables:/usr/sbin/iptables openssl:/usr/bin/openssl curl:/usr/bin/curl; do
    pkg=${line%%:*} path=${line#*:}
    [ -x "$path" ] || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing ${missing[*]} (apt-get)"
    apt-get update -qq >/dev/null &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null &&
      return
  fi
  log "missing: ${missing[*]}. Install them (Debian/Ubuntu: apt-get install -y ${missing[*]}) and run again."
  exit 1
}

up() {
  ensure_packages
  "$here/build.sh"
  local ip
  ip=$(node_ip)
  [ -n "$ip" ] || {
    log "no IPv4 address with a route on this machine"
    exit 1
  }
  "$here/pki.sh" "$dir/pki" "$ip" "$node"
  write_configs "$ip"
  modprobe br_netfilter 2>/dev/null || true
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 net.ipv4.ip_forward=1 || true
  start containerd containerd --config "$dir/containerd.toml"
  wait_for containerd 30 ctr --address "$sock" version
  start etcd "$bin/etcd" --name agentd-test --data-dir "$dir/etcd" \
    --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
    --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
    --initial-cluster agentd-test=http://127.0.0.1:23800 --quota-backend-bytes 2147483648
  wait_for etcd 60 curl -sf http://127.0.0.1:23790/health
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers http://127.0.0.1:23790 \
    --bind-address 0.0.0.0 --secure-port 6443 --advertise-address "$ip" \
    --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=true \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --client-ca-file "$dir/pki/ca.crt" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --kubelet-client-certificate "$dir/pki/apiserver-kubelet.crt" \
    --kubelet-client-key "$dir/pki/apiserver-kubelet.key" \
    --kubelet-certificate-authority "$dir/pki/ca.crt" --kubelet-preferred-address-types InternalIP \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local
  wait_for kube-apiserver 120 kubectl --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz
  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --use-service-account-credentials --leader-elect=false
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/scheduler.kubeconfig" --leader-elect=false
  start kubelet "$bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --hostname-override "$node" --node-ip "$ip"
  start kube-proxy "$bin/kube-proxy" --kubeconfig "$dir/kube-proxy.kubeconfig" \
    --hostname-override "$node" --proxy-mode iptables --cluster-cidr 10.244.0.0/16 \
    --conntrack-max-per-core 0
  wait_for kubelet 120 kubectl --kubeconfig "$dir/admin.kubeconfig" get node "$node"
  load_base_images
  kubectl --kubeconfig "$dir/admin.kubeconfig" apply -f "$here/system.yaml" >/dev/null
  start kube-router "$bin/kube-router" --kubeconfig "$dir/kube-router.kubeconfig" \
    --hostname-override "$node" --run-firewall=true --run-router=false \
    --run-service-proxy=false --enable-cni=false
  wait_for kube-router 60 iptables -S KUBE-ROUTER-FORWARD
  kubectl --kubeconfig "$dir/admin.kubeconfig" wait --for=condition=Ready "node/$node" --timeout=120s >/dev/null
  kubectl --kubeconfig "$dir/admin.kubeconfig" -n kube-system rollout status deploy/coredns --timeout=120s >/dev/null
  echo "$dir/admin.kubeconfig"
}

# load IMAGE...: docker save | ctr import into the cluster's containerd (k8s.io namespace).
load() {
  local image
  for image in "$@"; do
    docker save "$image" | ctr --address "$sock" -n k8s.io images import --all-platforms - >/dev/null
  done
}

load_base_images() {
  "$here/build-images.sh"
  load "$PAUSE_IMAGE" "$COREDNS_IMAGE"
}

down() {
  if [ -S "$sock" ]; then
    local ids
    ids=$(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null || true)
    for id in $ids; do ctr --address "$sock" -n k8s.io tasks kill -s KILL "$id" >/dev/null 2>&1 || true; done
  fi
  local c
  for c in kube-router kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
    [ -f "$dir/pids/$c" ] || continue
    kill "$(cat "$dir/pids/$c")" 2>/dev/null || true
  done
  sleep 1
  for c in kube-router kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
    [ -f "$dir/pids/$c" ] || continue
    kill -9 "$(cat "$dir/pids/$c")" 2>/dev/null || true
    rm -f "$dir/pids/$c"
  done
  pkill -9 -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null || true
  # Pod volumes and container root filesystems the kubelet and containerd mounted.
  grep -oE " ($dir|$run)/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  [ -x "$bin/kube-proxy" ] && "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  [ -x "$bin/kube-router" ] && "$bin/kube-router" --cleanup-config >/dev/null 2>&1 || true
  ip link del agentdk8s0 2>/dev/null || true
  rm -rf "$run"
}

status() {
  kubectl --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 &&
    kubectl --kubeconfig "$dir/admin.kubeconfig" get node "$node" -o name >/dev/null 2>&1 &&
    echo "up: $dir/admin.kubeconfig" && return 0
  echo "down"
  return 1
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
load)
  shift
  load "$@"
  ;;
*)
  echo "usage: $0 up|down|status|load IMAGE..." >&2
  exit 2
  ;;
esac
