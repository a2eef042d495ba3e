# shellcheck shell=bash
# The test bed's PKI (sourced by up.sh and nodes.sh): an EC CA made at up, and the certificates
# and kubeconfigs of the components and of every node. Needs env.sh.

PKI="$STATE_DIR/pki"

# cert NAME CN ORG KIND [SAN]: an EC P-256 key and a certificate signed by the test bed CA.
# KIND is server, client or both; SAN an openssl subjectAltName list. A random serial, so that
# nodes added at the same time never share the CA's serial file.
cert() {
  local name=$1 cn=$2 org=$3 kind=$4 san=${5:-} eku subj
  subj="/CN=$cn"
  case $kind in
    server) eku=serverAuth ;;
    client) eku=clientAuth ;;
    both) eku=serverAuth,clientAuth ;;
    *) die "cert $name: unknown kind $kind" ;;
  esac
  [[ -n $org ]] && subj="/O=$org$subj"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  {
    printf 'basicConstraints=critical,CA:FALSE\n'
    printf 'keyUsage=critical,digitalSignature,keyEncipherment\n'
    printf 'extendedKeyUsage=%s\n' "$eku"
    [[ -z $san ]] || printf 'subjectAltName=%s\n' "$san"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 365 -sha256 -extfile "$PKI/$name.ext" \
    -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# make_pki: the CA, the control plane's certificates and the service account keys.
make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=netclass-testbed-ca" -days 365 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/ca.crt"
  cert apiserver kube-apiserver "" server \
    "IP:$NODE_IP,IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters client
  cert admin netclass-testbed-admin system:masters client
  cert controller-manager system:kube-controller-manager "" client
  cert scheduler system:kube-scheduler "" client
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
}

# node_certs NODE IP: the kubelet's client certificate (the Node authorizer's identity) and
# serving certificate of a node, as kubelet-client-NODE and kubelet-NODE.
node_certs() {
  local node=$1 ip=$2
  cert "kubelet-client-$node" "system:node:$node" system:nodes client
  cert "kubelet-$node" "system:node:$node" system:nodes server "IP:$ip,DNS:$node"
}

# kubeconfig FILE CERTNAME: a kubeconfig with the CA and the client certificate embedded.
kubeconfig() {
  local file=$1 name=$2
  cat >"$file" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: netclass-testbed
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: netclass-testbed
  context:
    cluster: netclass-testbed
    user: $name
current-context: netclass-testbed
KUBECONFIG
  chmod 600 "$file"
}
