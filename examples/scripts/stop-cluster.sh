#!/bin/sh
# stop-cluster.sh [DIR]: SIGTERM the members start-cluster.sh started in
# DIR (default ./jobd-cluster) and wait for each to exit (data dirs kept).
set -eu
DIR=${1:-./jobd-cluster}
for i in 1 2 3; do
	f="$DIR/n$i.pid"
	[ -f "$f" ] || continue
	pid=$(cat "$f")
	if kill -TERM "$pid" 2>/dev/null; then
		n=0
		while kill -0 "$pid" 2>/dev/null; do
			n=$((n + 1))
			if [ "$n" -gt 300 ]; then
				echo "n$i (pid $pid) did not exit within 30s of SIGTERM" >&2
				exit 1
			fi
			sleep 0.1
		done
		echo "stopped n$i (pid $pid)"
	fi
	rm -f "$f"
done
