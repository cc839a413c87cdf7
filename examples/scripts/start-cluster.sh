#!/bin/sh
# start-cluster.sh [DIR]: build jobd and start a local 3-member cluster on
# loopback, with mutual TLS between members (throwaway certificates), in
# DIR (default ./jobd-cluster): DIR/bin/jobd, DIR/bin/jobctl, DIR/token, DIR/certs/,
# DIR/n1..n3 (data dirs), DIR/n1.log.., DIR/n1.pid.. Run it again after
# stop-cluster.sh to restart the same cluster from its data dirs.
#
# Ports: raft JOBD_RAFT_BASE+1..3 (default 7401-7403), API
# JOBD_HTTP_BASE+1..3 (default 8401-8403). JOBD=path and JOBCTL=path use
# those binaries instead of building them. Stop with stop-cluster.sh DIR.
set -eu
DIR=${1:-./jobd-cluster}
RAFT_BASE=${JOBD_RAFT_BASE:-7400}
HTTP_BASE=${JOBD_HTTP_BASE:-8400}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
JOBD=${JOBD:-$DIR/bin/jobd}
JOBCTL=${JOBCTL:-$DIR/bin/jobctl}
if [ ! -x "$JOBD" ]; then
	echo "building $JOBD"
	(cd "$ROOT/examples" && go build -o "$JOBD" ./jobd)
fi
if [ ! -x "$JOBCTL" ]; then
	echo "building $JOBCTL"
	(cd "$ROOT/examples" && go build -o "$JOBCTL" ./cmd/jobctl)
fi
if [ ! -f "$DIR/token" ]; then
	umask 077
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DIR/token"
fi
[ -f "$DIR/certs/ca.pem" ] || "$JOBD" gencerts -dir "$DIR/certs" -names n1,n2,n3
PEERS="n1=127.0.0.1:$((RAFT_BASE + 1)),n2=127.0.0.1:$((RAFT_BASE + 2)),n3=127.0.0.1:$((RAFT_BASE + 3))"
ENDPOINTS=""
for i in 1 2 3; do
	if [ -f "$DIR/n$i.pid" ] && kill -0 "$(cat "$DIR/n$i.pid")" 2>/dev/null; then
		echo "n$i is running already (pid $(cat "$DIR/n$i.pid"))"
	else
		"$JOBD" -id "n$i" -data "$DIR/n$i" -raft-addr "127.0.0.1:$((RAFT_BASE + i))" \
			-http-addr "127.0.0.1:$((HTTP_BASE + i))" -bootstrap -peers "$PEERS" -token-file "$DIR/token" \
			-cluster-ca "$DIR/certs/ca.pem" -cluster-cert "$DIR/certs/n$i.pem" -cluster-key "$DIR/certs/n$i-key.pem" \
			>>"$DIR/n$i.log" 2>&1 &
		echo $! >"$DIR/n$i.pid"
		echo "started n$i (pid $!): API http://127.0.0.1:$((HTTP_BASE + i)), log $DIR/n$i.log"
	fi
	ENDPOINTS="$ENDPOINTS${ENDPOINTS:+,}http://127.0.0.1:$((HTTP_BASE + i))"
done
echo "$ENDPOINTS" >"$DIR/endpoints"
cat <<EOT

console: http://127.0.0.1:$((HTTP_BASE + 1))/console/ (sign in with the token in $DIR/token)

export JOBD_ENDPOINTS=$ENDPOINTS JOBD_TOKEN=\$(cat $DIR/token)
$JOBCTL members
$JOBCTL submit -queue default -kind sha256 -payload hello
$JOBCTL help
$ROOT/examples/scripts/stop-cluster.sh $DIR
EOT
