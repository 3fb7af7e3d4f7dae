#!/usr/bin/env bash
# The nightly CI loop, offline, over three nights (what examples/ci runs each night, and what
# tests/nightly_loop.rs asserts step by step):
#
#   night 1   plan, apply what is due: two capacity blocks are bought
#   night 2   the calendar gained a campaign: plan --compare-to the applied plan shows the
#             blocks as bought since and the new on-demand run as added; apply buys nothing
#             again and sizes the pool (an Auto Scaling group) for the new campaign
#   after     release scales the pool to zero; the blocks have ended by themselves
#
#   examples/nightly-offline/run.sh     (from the repository root; needs cargo and python3)
#
# Nothing here reaches AWS: the EC2 capacity peer (tests/peers/ec2_capacity_peer.py) answers
# the capacity calls on 127.0.0.1, and moto's server behind it the launch-template and Auto
# Scaling calls; the state, journal, audit log and lock live in a bucket in moto's S3. moto comes from the tests' virtualenv when `cargo test` built it, otherwise
# it is installed once into a virtualenv under the target directory (PyPI is needed for that).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
work="$(mktemp -d)"
trap 'kill "${peer_pid:-0}" "${moto_pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
cp "$here/gpucap.toml" "$here/campaigns.yaml" "$work/"
mkdir -p "$work/plans"

venv="$target/tmp/gpucap-test-peers/venv"
if [ ! -x "$venv/bin/moto_server" ]; then
  venv="$target/tmp/nightly-example-venv"
  if [ ! -x "$venv/bin/moto_server" ]; then
    echo "installing moto's server into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "$(grep '^moto' "$repo/tests/peers/requirements.txt")"
  fi
fi

cargo build -q --manifest-path "$repo/Cargo.toml" --bin gpucap
gpucap="$target/debug/gpucap"
g() { (cd "$work" && "$gpucap" -c gpucap.toml "$@"); }

moto_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/moto_server" -H 127.0.0.1 -p "$moto_port" >/dev/null 2>&1 &
moto_pid=$!
coproc PEER { exec python3 "$repo/tests/peers/ec2_capacity_peer.py" --port 0 --upstream "http://127.0.0.1:$moto_port" --exit-on-stdin-eof; }
peer_pid=$PEER_PID
read -r port <&"${PEER[0]}"
peer="http://127.0.0.1:$port"
export GPUCAP_AWS_ENDPOINT_URL="$peer" AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export AWS_ACCESS_KEY_ID=peer-access-key AWS_SECRET_ACCESS_KEY=peer-secret-key
post() { python3 -c 'import sys,urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST"))' "$peer/_peer/$1" "$2"; }
purchases() { python3 -c 'import json,sys,urllib.request; print(len(json.load(urllib.request.urlopen(sys.argv[1]))["purchases"]))' "$peer/_peer/record"; }
# One of moto's default subnets, for the pool (an unsigned request naming the service is
# enough for moto to route it).
for _ in $(seq 50); do curl -s "http://127.0.0.1:$moto_port" >/dev/null && break; sleep 0.2; done
subnet=$(curl -s -X POST "$peer/" -H "Authorization: AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0" \
  -d "Action=DescribeSubnets&Version=2016-11-15" | grep -o '<subnetId>[^<]*' | head -1 | cut -d'>' -f2)
sed -i "s/SUBNET/$subnet/" "$work/gpucap.toml"
# The shared state's bucket, in moto's S3 (in an infra repo: a real bucket, and no endpoint).
curl -s -X PUT "http://127.0.0.1:$moto_port/gpucap-state" >/dev/null
export GPUCAP_S3_ENDPOINT="http://127.0.0.1:$moto_port"

night1="2026-12-28T00:00:00Z"; night2="2027-01-19T00:00:00Z"; after="2027-02-10T00:00:00Z"

echo "== night 1 ($night1): plan, apply what is due"
post clock "{\"now\": \"$night1\"}"
g plan --now "$night1" -q -o plans/current.json
python3 "$repo/examples/apply-offline/offerings.py" "$work/plans/current.json" > "$work/peer.json"
post config "$(cat "$work/peer.json")"
g apply plans/current.json --now "$night1" --window 30d --auto-approve
cp "$work/plans/current.json" "$work/plans/applied.json"
echo "blocks the peer sold: $(purchases)"

echo "== the calendar gains a campaign"
cat "$here/night2-campaign.yaml" >> "$work/campaigns.yaml"

echo "== night 2 ($night2): the pull request's comment"
post clock "{\"now\": \"$night2\"}"
g plan --now "$night2" -q --format markdown --compare-to plans/applied.json -o plans/current.json
echo "== night 2: apply (after review)"
g apply plans/current.json --now "$night2" --auto-approve
echo "blocks the peer sold: $(purchases) (nothing bought twice)"

echo "== after the campaigns ($after): release"
post clock "{\"now\": \"$after\"}"
g release --now "$after" --dry-run
g release --now "$after" --auto-approve
g state list
echo "== what the bucket holds"
curl -s "http://127.0.0.1:$moto_port/gpucap-state?list-type=2&prefix=nightly/" | grep -o '<Key>[^<]*' | cut -d'>' -f2
