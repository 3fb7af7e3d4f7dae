#!/usr/bin/env bash
# The whole apply loop, offline, against the local EC2 capacity peer: plan, apply, state list,
# re-run (nothing to do), then a run killed mid-way and a re-run that settles it.
#
#   examples/apply-offline/run.sh            (from the repository root; needs cargo, python3)
#
# Nothing here reaches AWS: GPUCAP_AWS_ENDPOINT_URL points the SDK at the peer on 127.0.0.1,
# and the keys below are the peer's, not real ones.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'kill "${peer_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
cp "$here/gpucap.toml" "$here/campaigns.yaml" "$work/"

cargo build -q --manifest-path "$repo/Cargo.toml" --bin gpucap
gpucap="${CARGO_TARGET_DIR:-$repo/target}/debug/gpucap"
now="2026-12-28T00:00:00Z"
g() { "$gpucap" -c "$work/gpucap.toml" "$@"; }

echo "== plan"
g plan --now "$now" -q -o "$work/plan.json" >/dev/null
python3 "$here/offerings.py" "$work/plan.json" > "$work/peer.json"

coproc PEER { exec python3 "$repo/tests/peers/ec2_capacity_peer.py" --port 0 --config "$work/peer.json" --exit-on-stdin-eof; }
peer_pid=$PEER_PID
read -r port <&"${PEER[0]}"
export GPUCAP_AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=peer-access-key AWS_SECRET_ACCESS_KEY=peer-secret-key
purchases() { python3 -c 'import json,sys,urllib.request; r=json.load(urllib.request.urlopen(sys.argv[1])); print(len(r["purchases"]))' "http://127.0.0.1:$port/_peer/record"; }
configure() { python3 -c 'import sys,urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=open(sys.argv[2],"rb").read(), method="POST"))' "http://127.0.0.1:$port/_peer/config" "$1"; }

echo "== apply"
g apply "$work/plan.json" --now "$now" --window 30d --auto-approve
echo "== state list"
g state list
echo "== apply again: nothing to do"
g apply "$work/plan.json" --now "$now" --window 30d --auto-approve
echo "blocks the peer sold: $(purchases)"

echo "== a new campaign, a new plan; its apply is killed after its purchase was journalled as sent"
cat >> "$work/campaigns.yaml" <<'YAML'
  - name: eval-sweep
    team: research
    accelerator: h100
    gpus: 16
    start: 2027-01-14T12:00:00Z
    duration: 3d
    interruptible: false
    priority: high
YAML
g plan --now "$now" -q -o "$work/plan2.json" >/dev/null
python3 "$here/offerings.py" "$work/plan2.json" > "$work/peer2.json"
configure "$work/peer2.json"
before=$(wc -l < "$work/.gpucap/journal.jsonl")
# GPUCAP_HALT_AFTER_JOURNAL is a test hook: the run stops after its 2nd journal record.
GPUCAP_HALT_AFTER_JOURNAL=2 "$gpucap" -c "$work/gpucap.toml" apply "$work/plan2.json" --now "$now" --window 30d --auto-approve &
pid=$!
while [ "$(wc -l < "$work/.gpucap/journal.jsonl")" -lt $((before + 2)) ]; do sleep 0.2; done
sleep 0.5; kill -9 "$pid"; wait "$pid" 2>/dev/null || true
echo "(killed with SIGKILL)"
lock=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/.gpucap/lock.json")
echo "== the next run waits for the dead run's lock, and names it"
g apply "$work/plan2.json" --now "$now" --window 30d --auto-approve --lock-timeout 1s || true
echo "== force-unlock $lock, then apply again: the journal is settled first"
g force-unlock "$lock"
g apply "$work/plan2.json" --now "$now" --window 30d --auto-approve --reconcile-wait 2s
g state list
echo "blocks the peer sold: $(purchases) (each exactly once)"
