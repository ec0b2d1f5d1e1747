#!/bin/sh
# scripts/make-certs.sh: certificates for a once cluster, with the openssl CLI.
#
#   make-certs.sh ca DIR [NAME]          a CA: DIR/NAME.pem, DIR/NAME.key
#                                        (NAME default "ca")
#   make-certs.sh node DIR NAME IP,... [DNS,...]
#                                        a node certificate signed by DIR/ca:
#                                        DIR/NAME.pem and DIR/NAME.key, with
#                                        an IP SAN per IP (the addresses the
#                                        node is reached at: clients and
#                                        peers check them) and DNS SANs;
#                                        serves both TLS client and server
#   make-certs.sh client DIR NAME [URI]  a client certificate signed by
#                                        DIR/ca, CN=NAME, DNS SAN NAME (and a
#                                        URI SAN, e.g. spiffe://org/tenant)
#   make-certs.sh expired DIR NAME IP    a node certificate of DIR/ca whose
#                                        validity ended in 2021 (for tests)
#
# Environment: CA=NAME signs with DIR/NAME.pem instead of DIR/ca.pem;
# DAYS (default 825) is the validity of what is made. Keys are EC P-256,
# written 0600. Example, a three-node cluster on 10.0.0.1..3:
#
#   scripts/make-certs.sh ca certs
#   for i in 1 2 3; do scripts/make-certs.sh node certs n$i 10.0.0.$i; done
#   scripts/make-certs.sh client certs ops
#   onced ... --tls-cert certs/n1.pem --tls-key certs/n1.key --tls-ca certs/ca.pem
#   oncectl --tls-ca certs/ca.pem --tls-cert certs/ops.pem --tls-key certs/ops.key ...
set -eu

usage() {
    sed -n '3,27p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2
days=${DAYS:-825}
ca=${CA:-ca}
mkdir -p "$dir"
umask 077

newkey() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
        -out "$1" 2>/dev/null
}

# The SAN list of IPs and DNS names: "IP:a,IP:b,DNS:c".
sans() {
    out=""
    for ip in $(echo "$1" | tr ',' ' '); do
        out="${out:+$out,}IP:$ip"
    done
    for dns in $(echo "${2:-}" | tr ',' ' '); do
        out="${out:+$out,}DNS:$dns"
    done
    echo "$out"
}

# sign NAME SUBJECT EXTENSIONS: NAME.csr -> NAME.pem, by the CA.
sign() {
    ext="$dir/$1.ext"
    printf '%s\n' "$3" >"$ext"
    newkey "$dir/$1.key"
    openssl req -new -key "$dir/$1.key" -subj "$2" -out "$dir/$1.csr"
    openssl x509 -req -in "$dir/$1.csr" -CA "$dir/$ca.pem" \
        -CAkey "$dir/$ca.key" -CAcreateserial -days "$days" \
        -extfile "$ext" -out "$dir/$1.pem" 2>/dev/null
    rm -f "$dir/$1.csr" "$ext"
}

case "$cmd" in
ca)
    name=${1:-ca}
    newkey "$dir/$name.key"
    openssl req -x509 -new -key "$dir/$name.key" -subj "/CN=once $name" \
        -days "$days" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$dir/$name.pem"
    ;;
node)
    [ $# -ge 2 ] || usage
    sign "$1" "/CN=$1" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$(sans "$2" "${3:-}")"
    ;;
client)
    [ $# -ge 1 ] || usage
    san="DNS:$1"
    [ $# -ge 2 ] && san="$san,URI:$2"
    sign "$1" "/CN=$1" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
subjectAltName=$san"
    ;;
expired)
    [ $# -ge 2 ] || usage
    # openssl x509 cannot back-date; openssl ca can, with a throwaway db.
    db=$(mktemp -d)
    : >"$db/index"
    echo 01 >"$db/serial"
    cat >"$db/cnf" <<EOF
[ca]
default_ca = d
[d]
database = $db/index
serial = $db/serial
new_certs_dir = $db
default_md = sha256
policy = p
copy_extensions = none
[p]
commonName = supplied
[x]
basicConstraints = CA:FALSE
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = $(sans "$2")
EOF
    newkey "$dir/$1.key"
    openssl req -new -key "$dir/$1.key" -subj "/CN=$1" -out "$db/csr"
    openssl ca -batch -config "$db/cnf" -extensions x -notext \
        -cert "$dir/$ca.pem" -keyfile "$dir/$ca.key" \
        -startdate 20200101000000Z -enddate 20210101000000Z \
        -in "$db/csr" -out "$dir/$1.pem" 2>/dev/null
    rm -rf "$db"
    ;;
*)
    usage
    ;;
esac
