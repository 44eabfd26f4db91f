#!/usr/bin/env bash
# The test cluster's certificates and keys (scripts/kubernetes/cluster.sh): one CA, the API
# server's serving certificate (its Service address, the node's address, loopback), client
# certificates for the administrator and each component, the kubelet's serving certificate
# and the service-account signing key. Made once per cluster directory; never overwritten
# (a cluster keeps its identity across restarts).
#
#   scripts/kubernetes/pki.sh DIR NODE_IP NODE_NAME
set -euo pipefail
dir=$1 node_ip=$2 node_name=$3
mkdir -p "$dir"
cd "$dir"
[ -f done ] && exit 0

openssl_quiet() { openssl "$@" 2>/dev/null; }

openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=agentd-test-cluster-ca" \
  -keyout ca.key -out ca.crt

# cert NAME CN ORG [SAN]: a key and a certificate signed by the CA.
cert() {
  local name=$1 cn=$2 org=$3 san=${4:-}
  local subj="/CN=$cn"
  [ -n "$org" ] && subj="/O=$org/CN=$cn"
  openssl_quiet req -newkey rsa:2048 -nodes -subj "$subj" -keyout "$name.key" -out "$name.csr"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$san"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$name.ext"
  openssl_quiet x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile "$name.ext" -out "$name.crt"
  rm -f "$name.csr" "$name.ext"
}

cert apiserver kube-apiserver "" \
  "IP:127.0.0.1,IP:10.96.0.1,IP:$node_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin admin system:masters
cert apiserver-kubelet kube-apiserver-kubelet-client system:masters
cert controller-manager system:kube-controller-manager ""
cert scheduler system:kube-scheduler ""
cert kube-proxy system:kube-proxy ""
cert kubelet "system:node:$node_name" system:nodes "IP:127.0.0.1,IP:$node_ip,DNS:$node_name"
cert kube-router kube-router ""
openssl_quiet genrsa -out sa.key 2048
openssl_quiet rsa -in sa.key -pubout -out sa.pub
chmod 600 ./*.key
touch done
