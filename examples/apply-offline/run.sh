#!/usr/bin/env bash
# The whole apply loop, offline, against the local EC2 capacity peer: plan, apply, state list,
# re-run (nothing to do), then a run killed mid-way and a re-run that settles it. Then pools on
# GCP and Azure (pools.toml) against the local Compute Engine and Azure Resource Manager peers:
# apply makes and sizes a managed instance group and a (spot) VM scale set, and release scales
# them to zero once the campaigns are over.
#
#   examples/apply-offline/run.sh            (from the repository root; needs cargo, python3)
#
# Nothing here reaches AWS, GCP or Azure: the GPUCAP_*_ENDPOINT_URL variables point gpucap at
# the peers on 127.0.0.1, and the keys and tokens below are the peers', not real ones.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'kill "${peer_pid:-0}" "${gce_pid:-0}" "${arm_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
cp "$here/gpucap.toml" "$here/campaigns.yaml" "$here/pools.toml" "$here/pools-campaigns.yaml" "$work/"

# The gcp feature builds the Google SDK (AWS and Azure are in by default).
cargo build -q --manifest-path "$repo/Cargo.toml" --features gcp --bin gpucap
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
echo "== the next run takes over the dead run's lock $lock (audited) and settles the journal first"
g apply "$work/plan2.json" --now "$now" --window 30d --auto-approve --reconcile-wait 2s
grep '"lock-takeover"' "$work/.gpucap/audit.jsonl"
g state list
echo "blocks the peer sold: $(purchases) (each exactly once)"

echo
echo "== pools on GCP and Azure (pools.toml): two campaigns running from now, one per cloud"
p() { "$gpucap" -c "$work/pools.toml" "$@"; }
# A peer prints its port on its first line; it exits with this script.
start_peer() { python3 "$1" --port 0 > "$2" & echo $!; }
port_of() { while [ ! -s "$1" ]; do sleep 0.1; done; head -1 "$1"; }
gce_pid=$(start_peer "$repo/tests/peers/gce_peer.py" "$work/gce.port")
arm_pid=$(start_peer "$repo/tests/peers/azure_arm_peer.py" "$work/arm.port")
gce="http://127.0.0.1:$(port_of "$work/gce.port")"
arm="http://127.0.0.1:$(port_of "$work/arm.port")"
export GPUCAP_GCP_ENDPOINT_URL="$gce" GPUCAP_GCP_POLL_MS=50
export GPUCAP_AZURE_ENDPOINT_URL="$arm" GPUCAP_AZURE_POLL_MS=50
export AZURE_SUBSCRIPTION_ID=00000000-0000-4000-8000-000000000001 AZURE_ACCESS_TOKEN=peer-token
# The public key the Azure VMs accept (Azure makes no Linux VM without a key or a password).
export GPUCAP_AZURE_SSH_PUBLIC_KEY="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPeerExampleKey gpucap-offline"
p plan --now "$now" -q -o "$work/pools-plan.json" >/dev/null
echo "== apply: a managed instance group on GCP, a spot VM scale set on Azure, sized and counted"
p apply "$work/pools-plan.json" --now "$now" --window 30d --auto-approve
p state list
echo "== apply again: both at their size, nothing resized"
p apply "$work/pools-plan.json" --now "$now" --window 30d --auto-approve
echo "== release after the campaigns: both pools scaled to zero"
p release --now 2027-01-05T00:00:00Z --auto-approve
python3 - "$gce/_peer/record" "$arm/_peer/record" <<'PY'
import json, sys, urllib.request
gce, arm = (json.load(urllib.request.urlopen(u)) for u in sys.argv[1:3])
for g in gce["instance_group_managers"]:
    print("GCP group %s: target %s, %s running" % (g["name"], g["targetSize"], g["_running"]))
for s in arm["scale_sets"]:
    print("Azure scale set %s (%s): capacity %s" % (s["name"], s["properties"]["virtualMachineProfile"]["priority"], s["sku"]["capacity"]))
PY
