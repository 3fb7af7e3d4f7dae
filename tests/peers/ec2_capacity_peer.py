#!/usr/bin/env python3
"""A local EC2 capacity peer for gpucap's tests: an HTTP server that speaks the EC2 Query
protocol (form-encoded POST, `Action=...`, XML responses in the documented shapes) for the
capacity APIs moto does not implement, keeps its own record of everything bought, and
injects faults on request.

Why it exists: moto 5.2.5 answers `CreateCapacityReservation`, `DescribeCapacityReservations`,
`PurchaseCapacityBlock`, ... with 500 NotImplemented, and no emulator models ClientToken
dedupe, throttling, insufficient capacity or a response lost after the cloud acted. gpucap's
apply must be tested against exactly those.

Served locally (everything else is forwarded, see below):
  DescribeCapacityBlockOfferings  offerings configured at start (filtered by type, count,
                                  duration and date range)
  PurchaseCapacityBlock           a capacity-block reservation, `payment-pending`, then
                                  `scheduled` (then `active`/`expired` by the clock)
  CreateCapacityReservation       honours ClientToken: same token and parameters -> the same
                                  reservation; same token, other parameters ->
                                  IdempotentParameterMismatch
  DescribeCapacityReservations    by CapacityReservationId.N and by Filter.N (tag:KEY,
                                  tag-key, state, instance-type, availability-zone,
                                  reservation-type)
  ModifyCapacityReservation, CancelCapacityReservation
`DryRun=true` on a mutating call answers 412 DryRunOperation and changes nothing.
Auth headers (SigV4) are ignored.

Service Quotas (AWS JSON 1.1: POST /, `X-Amz-Target: ServiceQuotasV20190624.<Op>`,
`Content-Type: application/x-amz-json-1.1`; API version 2019-06-24,
https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_GetServiceQuota.html,
read 2026-11-25), because moto 5.2.5 knows only `vpc` quotas and answers every `ec2` code
with NoSuchResourceException, with no way to set one:
  GetServiceQuota            {"ServiceCode", "QuotaCode"} -> {"Quota": {"ServiceCode",
                             "ServiceName", "QuotaArn", "QuotaCode", "QuotaName", "Value",
                             "Unit", "Adjustable", "GlobalQuota"}}: the applied value set by
                             `service_quotas` for the region the request is signed for (the
                             SigV4 credential scope); otherwise 400 NoSuchResourceException
  GetAWSDefaultServiceQuota  the same shape, from `service_quota_defaults` (any region);
                             otherwise 400 NoSuchResourceException
Errors are the JSON 1.1 envelope {"__type": CODE, "message": ...} with `x-amzn-ErrorType`.
Transport fault rules match these by operation name (`"action": "GetServiceQuota"`):
"throttle" answers 400 TooManyRequestsException, "status" answers its status and "code"
(e.g. 400 AccessDeniedException). Each call is recorded in `service_quota_calls`
([{"op", "region", "code"}]).

Any other Action (launch templates, Auto Scaling, ...) is forwarded unchanged, headers and
body, to `--upstream URL` (moto's server), so one endpoint serves both; without an upstream
it is refused with 400 and an EC2 error envelope.

Control API (JSON, not part of EC2):
  GET  /_peer/record   what happened: {"requests", "actions": {Action: n}, "forwarded",
                       "faults": [{"action", "call", "fault"}], "fault_counts": {fault: n},
                       "purchases": [...], "reservations": [...],
                       "intents": {intent: {"requests", "purchases", "reservations"}}}
  POST /_peer/config   {"offerings": [{"id", "instance_type", "zone", "instance_count",
                       "start", "end", "duration_hours", "upfront_fee", "currency",
                       "stock"}], "payment_pending_seconds": 0, "account_id": "...",
                       "service_quotas": {REGION: {CODE: VALUE}},
                       "service_quota_defaults": {CODE: VALUE}}
                       (also `--config FILE` at start); replaces the offerings
  POST /_peer/faults   {"seed": 7, "rules": [RULE, ...]} replaces every fault rule and
                       reseeds the random source (so probabilistic runs repeat)
  POST /_peer/reset    forgets every resource, the record and the faults
  POST /_peer/clock    {"now": RFC3339} moves the peer's clock there (it keeps running);
                       {"now": null} goes back to the real time
  POST /_peer/usage    {"cr-…": N, ...} N instances run in that reservation from now on
                       (while active its availableInstanceCount is its total minus N)

A RULE is {"fault": KIND, ...}. Transport faults match on "action" (a name, a list of
names, or "*"/absent for any), optional "calls" (1-based indices of that action's calls,
counted as they arrive), optional "probability" (0..1, drawn from the seeded source) and
optional "times" (how often it may fire in all):
  "throttle"       400 RequestLimitExceeded (or "status": 503; Auto Scaling gets Throttling)
  "status"         "status": 500|503|..., optional "code" (InternalError / Unavailable)
  "reset"          closes the connection with a TCP reset before acting: nothing happened
  "latency"        sleeps "seconds" before answering (combines with the others)
  "drop_response"  carries the call out, then closes the connection without a response:
                   the dangerous case, where the caller cannot know what happened
State faults:
  "ice"            {"instance_type", "zone" (optional)}: CreateCapacityReservation,
                   PurchaseCapacityBlock and growing ModifyCapacityReservation fail with
                   InsufficientInstanceCapacity (HTTP 500, as EC2 lists it)
  "expire_offering" {"offering_id"}: purchases fail InvalidCapacityBlockOfferingIdExpired
                   and Describe stops listing it
  "describe_delay" {"seconds"}: resources created while it is set stay invisible to
                   DescribeCapacityReservations for that long (eventual consistency)

Every request, and every injected fault, is counted in the record.

Usage: ec2_capacity_peer.py [--port 0] [--upstream URL] [--config FILE] [--exit-on-stdin-eof]
Binds 127.0.0.1 only, prints the port it listens on as the first line of stdout, and exits
on SIGTERM or when its parent process dies (its parent pid changes, or, with
--exit-on-stdin-eof, the pipe the parent holds on its stdin closes). Python 3 standard
library only.
"""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
ASG_NS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
LOCAL_ACTIONS = {
    "DescribeCapacityBlockOfferings",
    "PurchaseCapacityBlock",
    "CreateCapacityReservation",
    "DescribeCapacityReservations",
    "ModifyCapacityReservation",
    "CancelCapacityReservation",
}
MUTATING = LOCAL_ACTIONS - {"DescribeCapacityBlockOfferings", "DescribeCapacityReservations"}
SERVICE_QUOTAS_PREFIX = "ServiceQuotasV20190624."
# The titles AWS gives the EC2 instance quotas gpucap reads (Service Quotas console, and
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-resource-limits.html).
QUOTA_NAMES = {
    "L-417A185B": "Running On-Demand P instances",
    "L-7212CCBC": "All P Spot Instance Requests",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
}
TRANSPORT_FAULTS = {"throttle", "status", "reset", "latency", "drop_response"}
STATE_FAULTS = {"ice", "expire_offering", "describe_delay"}
INTENT_TAG = "gpucap:intent"


# The peer's clock: the real one, moved by POST /_peer/clock (so that a test planning at a
# future `--now` sees reservations start, run and end at the times it plans for).
CLOCK = {"offset": timedelta(0)}


def now():
    return datetime.now(timezone.utc) + CLOCK["offset"]


def iso(t):
    if t is None:
        return None
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (
        t.microsecond // 1000
    )


def parse_time(s):
    if s is None or s == "":
        return None
    s = s.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    t = datetime.fromisoformat(s)
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Peer:
    """All state, behind one lock."""

    def __init__(self, upstream):
        self.lock = threading.Lock()
        self.upstream = upstream
        self.next_id = 1
        self.reset_locked()
        self.offerings = []
        self.payment_pending_seconds = 0.0
        self.account_id = "123456789012"
        self.service_quotas = {}  # region -> code -> value
        self.service_quota_defaults = {}  # code -> value

    def reset_locked(self):
        self.reservations = {}  # id -> dict
        self.order = []  # ids in creation order
        self.tokens = {}  # ClientToken -> (params, id)
        self.sold = {}  # offering id -> count
        self.rules = []
        self.fired = []  # per rule: times fired
        self.rng = random.Random(0)
        self.record = {
            "requests": 0,
            "actions": {},
            "forwarded": 0,
            "faults": [],
            "fault_counts": {},
            "purchases": [],
            "intents": {},
            "service_quota_calls": [],
        }

    def new_id(self, prefix):
        n = self.next_id
        self.next_id += 1
        return "%s-%017x" % (prefix, 0x0A000000000000000 + n)

    # ---- control -------------------------------------------------------------------------

    def configure(self, cfg):
        with self.lock:
            if "service_quotas" in cfg:
                self.service_quotas = {
                    r: {c: float(v) for c, v in codes.items()}
                    for r, codes in cfg["service_quotas"].items()
                }
            if "service_quota_defaults" in cfg:
                self.service_quota_defaults = {
                    c: float(v) for c, v in cfg["service_quota_defaults"].items()
                }
            if "offerings" in cfg:
                self.offerings = []
                for o in cfg["offerings"]:
                    self.offerings.append(
                        {
                            "id": o["id"],
                            "instance_type": o["instance_type"],
                            "zone": o["zone"],
                            "instance_count": int(o.get("instance_count", 1)),
                            "start": parse_time(o["start"]),
                            "end": parse_time(o["end"]),
                            "duration_hours": int(
                                o.get(
                                    "duration_hours",
                                    (parse_time(o["end"]) - parse_time(o["start"])).total_seconds()
                                    // 3600,
                                )
                            ),
                            "upfront_fee": str(o.get("upfront_fee", "0.00")),
                            "currency": o.get("currency", "USD"),
                            "stock": o.get("stock"),
                        }
                    )
            if "payment_pending_seconds" in cfg:
                self.payment_pending_seconds = float(cfg["payment_pending_seconds"])
            if "account_id" in cfg:
                self.account_id = str(cfg["account_id"])

    def set_faults(self, cfg):
        rules = cfg.get("rules", [])
        for r in rules:
            kind = r.get("fault")
            if kind not in TRANSPORT_FAULTS | STATE_FAULTS:
                raise ValueError("unknown fault %r" % kind)
        with self.lock:
            self.rules = rules
            self.fired = [0] * len(rules)
            self.rng = random.Random(cfg.get("seed", 0))

    def snapshot(self):
        with self.lock:
            out = json.loads(json.dumps(self.record))
            out["reservations"] = [self.public(self.reservations[i]) for i in self.order]
            return out

    def public(self, r):
        return {
            "id": r["id"],
            "reservation_type": r["reservation_type"],
            "instance_type": r["instance_type"],
            "zone": r["zone"],
            "instances": r["count"],
            "state": self.state_of(r),
            "start": iso(r["start"]),
            "end": iso(r["end"]),
            "end_date_type": r["end_date_type"],
            "delivery_preference": r.get("delivery_preference"),
            "client_token": r.get("client_token"),
            "offering_id": r.get("offering_id"),
            "tag_resource_types": r["tag_resource_types"],
            "tags": r["tags"],
        }

    # ---- faults --------------------------------------------------------------------------

    def count_fault_locked(self, action, call, kind):
        self.record["faults"].append({"action": action, "call": call, "fault": kind})
        fc = self.record["fault_counts"]
        fc[kind] = fc.get(kind, 0) + 1

    def transport_faults(self, action, call):
        """The latency to add and the one transport fault (or None) for this call."""
        latency = 0.0
        chosen = None
        with self.lock:
            for i, r in enumerate(self.rules):
                kind = r["fault"]
                if kind not in TRANSPORT_FAULTS:
                    continue
                want = r.get("action", "*")
                if want != "*" and not (
                    action == want or (isinstance(want, list) and action in want)
                ):
                    continue
                if "calls" in r and call not in r["calls"]:
                    continue
                if r.get("times") is not None and self.fired[i] >= int(r["times"]):
                    continue
                if kind != "latency" and chosen is not None:
                    continue
                p = float(r.get("probability", 1.0))
                if p < 1.0 and self.rng.random() >= p:
                    continue
                self.fired[i] += 1
                self.count_fault_locked(action, call, kind)
                if kind == "latency":
                    latency += float(r.get("seconds", 1.0))
                else:
                    chosen = r
        return latency, chosen

    def ice_locked(self, instance_type, zone, action):
        for r in self.rules:
            if r["fault"] == "ice" and r.get("instance_type") in (None, instance_type):
                if r.get("zone") in (None, zone):
                    self.count_fault_locked(action, None, "ice")
                    return ApiError(
                        int(r.get("status", 500)),
                        "InsufficientInstanceCapacity",
                        "We currently do not have sufficient %s capacity in the Availability "
                        "Zone you requested (%s)." % (instance_type, zone),
                    )
        return None

    def expired_locked(self, offering_id):
        return any(
            r["fault"] == "expire_offering" and r.get("offering_id") == offering_id
            for r in self.rules
        )

    def describe_delay_locked(self):
        delay = 0.0
        for r in self.rules:
            if r["fault"] == "describe_delay":
                delay = max(delay, float(r.get("seconds", 0)))
        return delay

    # ---- state ---------------------------------------------------------------------------

    def state_of(self, r):
        t = now()
        if r["state"] in ("cancelled", "failed"):
            return r["state"]
        if r["reservation_type"] == "capacity-block":
            if t < r["paid_at"]:
                return "payment-pending"
        if r["end"] is not None and t >= r["end"]:
            return "expired"
        if r["start"] is not None and t < r["start"]:
            return "scheduled"
        return "active"

    def note_intent_locked(self, tags, field):
        intent = tags.get(INTENT_TAG)
        if intent is None:
            return
        entry = self.record["intents"].setdefault(
            intent, {"requests": 0, "purchases": 0, "reservations": 0}
        )
        entry[field] += 1

    # ---- EC2 actions ---------------------------------------------------------------------

    def handle(self, action, p):
        fn = getattr(self, "do_" + action)
        with self.lock:
            tags = tag_specs(p)
            self.tag_resource_types = tag_resource_types(p)
            if action in MUTATING:
                self.note_intent_locked(tags, "requests")
            return fn(p, tags)

    def visible_offerings_locked(self):
        return [
            o
            for o in self.offerings
            if not self.expired_locked(o["id"])
            and (o["stock"] is None or self.sold.get(o["id"], 0) < int(o["stock"]))
        ]

    def do_DescribeCapacityBlockOfferings(self, p, _tags):
        itype = p.get("InstanceType")
        count = p.get("InstanceCount")
        hours = p.get("CapacityDurationHours")
        start_from = parse_time(p.get("StartDateRange"))
        end_by = parse_time(p.get("EndDateRange"))
        if not itype or not count or not hours:
            raise ApiError(
                400,
                "MissingParameter",
                "InstanceType, InstanceCount and CapacityDurationHours are required.",
            )
        items = []
        for o in self.visible_offerings_locked():
            if o["instance_type"] != itype or o["instance_count"] != int(count):
                continue
            if o["duration_hours"] != int(hours):
                continue
            if start_from is not None and o["start"] < start_from:
                continue
            if end_by is not None and o["end"] > end_by:
                continue
            items.append(
                "<item>"
                + el("capacityBlockOfferingId", o["id"])
                + el("instanceType", o["instance_type"])
                + el("availabilityZone", o["zone"])
                + el("instanceCount", o["instance_count"])
                + el("startDate", iso(o["start"]))
                + el("endDate", iso(o["end"]))
                + el("capacityBlockDurationHours", o["duration_hours"])
                + el("upfrontFee", o["upfront_fee"])
                + el("currencyCode", o["currency"])
                + el("tenancy", "default")
                + "</item>"
            )
        if bool_param(p, "DryRun"):
            raise dry_run()
        return (
            "<capacityBlockOfferingSet>" + "".join(items) + "</capacityBlockOfferingSet>"
            "<nextToken/>"
        )

    def do_PurchaseCapacityBlock(self, p, tags):
        oid = p.get("CapacityBlockOfferingId")
        if not p.get("InstancePlatform"):
            raise ApiError(400, "MissingParameter", "InstancePlatform is required.")
        if not oid:
            raise ApiError(400, "MissingParameter", "CapacityBlockOfferingId is required.")
        if not oid.startswith("cb-"):
            raise ApiError(
                400,
                "InvalidCapacityBlockOfferingIdMalformed",
                "The Capacity Block offering ID '%s' is malformed." % oid,
            )
        if self.expired_locked(oid):
            self.count_fault_locked("PurchaseCapacityBlock", None, "expire_offering")
            raise ApiError(
                400,
                "InvalidCapacityBlockOfferingIdExpired",
                "The Capacity Block offering ID is no longer available.",
            )
        offering = next((o for o in self.visible_offerings_locked() if o["id"] == oid), None)
        if offering is None:
            raise ApiError(
                400,
                "InvalidCapacityBlockOfferingIdNotFound",
                "The Capacity Block offering ID '%s' does not exist." % oid,
            )
        ice = self.ice_locked(offering["instance_type"], offering["zone"], "PurchaseCapacityBlock")
        if ice:
            raise ice
        if bool_param(p, "DryRun"):
            raise dry_run()
        t = now()
        rid = self.new_id("cr")
        r = {
            "id": rid,
            "reservation_type": "capacity-block",
            "instance_type": offering["instance_type"],
            "platform": p.get("InstancePlatform"),
            "zone": offering["zone"],
            "count": offering["instance_count"],
            "start": offering["start"],
            "end": offering["end"],
            "end_date_type": "limited",
            "match": "targeted",
            "created": t,
            "paid_at": t + timedelta(seconds=self.payment_pending_seconds),
            "state": "live",
            "tags": tags,
            "offering_id": oid,
            "tag_resource_types": self.tag_resource_types,
            "capacity_block_id": self.new_id("cb"),
            "visible_at": t + timedelta(seconds=self.describe_delay_locked()),
        }
        self.add_locked(r)
        self.sold[oid] = self.sold.get(oid, 0) + 1
        self.record["purchases"].append(
            {
                "capacity_reservation_id": rid,
                "offering_id": oid,
                "intent": tags.get(INTENT_TAG),
                "tags": tags,
                "tag_resource_types": self.tag_resource_types,
                "time": iso(t),
            }
        )
        self.note_intent_locked(tags, "purchases")
        # The response shows the state at purchase time: payment is pending (Describe shows
        # `scheduled` once `payment_pending_seconds` have passed).
        block = (
            "<item>"
            + el("capacityBlockId", r["capacity_block_id"])
            + el("availabilityZone", r["zone"])
            + "<capacityReservationIdSet><item>"
            + escape(rid)
            + "</item></capacityReservationIdSet>"
            + el("startDate", iso(r["start"]))
            + el("endDate", iso(r["end"]))
            + el("createDate", iso(t))
            + el("state", "payment-pending")
            + tag_set(tags)
            + "</item>"
        )
        return (
            "<capacityReservation>"
            + self.reservation_xml(r, "payment-pending")
            + "</capacityReservation>"
            + "<capacityBlockSet>"
            + block
            + "</capacityBlockSet>"
        )

    def do_CreateCapacityReservation(self, p, tags):
        for req in ("InstanceType", "InstancePlatform", "InstanceCount"):
            if not p.get(req):
                raise ApiError(400, "MissingParameter", "%s is required." % req)
        zone = p.get("AvailabilityZone") or p.get("AvailabilityZoneId")
        if not zone:
            raise ApiError(
                400, "MissingParameter", "AvailabilityZone or AvailabilityZoneId is required."
            )
        end_type = p.get("EndDateType", "unlimited")
        end = parse_time(p.get("EndDate"))
        if end_type == "limited" and end is None:
            raise ApiError(400, "InvalidParameterValue", "EndDate is required when limited.")
        if end_type == "unlimited" and end is not None:
            raise ApiError(400, "InvalidParameterValue", "EndDate is not allowed when unlimited.")
        count = int(p["InstanceCount"])
        if count < 1:
            raise ApiError(400, "InvalidParameterValue", "InstanceCount must be at least 1.")
        token = p.get("ClientToken")
        key_params = {
            k: v for k, v in p.items() if k not in ("Action", "Version", "ClientToken", "DryRun")
        }
        if token is not None and token in self.tokens:
            seen, rid = self.tokens[token]
            if seen != key_params:
                raise ApiError(
                    400,
                    "IdempotentParameterMismatch",
                    "The client token you have provided is associated with a resource that "
                    "is already deleted or has different parameters.",
                )
            if bool_param(p, "DryRun"):
                raise dry_run()
            return (
                "<capacityReservation>"
                + self.reservation_xml(self.reservations[rid])
                + "</capacityReservation>"
            )
        ice = self.ice_locked(p["InstanceType"], zone, "CreateCapacityReservation")
        if ice:
            raise ice
        if bool_param(p, "DryRun"):
            raise dry_run()
        t = now()
        start = parse_time(p.get("StartDate"))
        rid = self.new_id("cr")
        r = {
            "id": rid,
            "reservation_type": "default",
            "instance_type": p["InstanceType"],
            "platform": p["InstancePlatform"],
            "zone": zone,
            "count": count,
            "start": start or t,
            "end": end,
            "end_date_type": end_type,
            "match": p.get("InstanceMatchCriteria", "open"),
            "created": t,
            "paid_at": t,
            "state": "live",
            "tags": tags,
            "client_token": token,
            "tag_resource_types": self.tag_resource_types,
            "visible_at": t + timedelta(seconds=self.describe_delay_locked()),
        }
        if start is not None:
            r["delivery_preference"] = p.get("DeliveryPreference", "incremental")
        self.add_locked(r)
        if token is not None:
            self.tokens[token] = (key_params, rid)
        self.note_intent_locked(tags, "reservations")
        return "<capacityReservation>" + self.reservation_xml(r) + "</capacityReservation>"

    def do_DescribeCapacityReservations(self, p, _tags):
        ids = indexed(p, "CapacityReservationId")
        filters = parse_filters(p)
        t = now()
        visible = [self.reservations[i] for i in self.order if self.reservations[i]["visible_at"] <= t]
        if ids:
            by_id = {r["id"]: r for r in visible}
            missing = [i for i in ids if i not in by_id]
            if missing:
                raise ApiError(
                    400,
                    "InvalidCapacityReservationId.NotFound",
                    "The capacity reservation ID '%s' does not exist" % missing[0],
                )
            visible = [by_id[i] for i in ids]
        out = [r for r in visible if all(self.filter_ok(r, n, vs) for n, vs in filters)]
        if bool_param(p, "DryRun"):
            raise dry_run()
        items = "".join("<item>" + self.reservation_xml(r) + "</item>" for r in out)
        return "<capacityReservationSet>" + items + "</capacityReservationSet><nextToken/>"

    def filter_ok(self, r, name, values):
        if name.startswith("tag:"):
            return r["tags"].get(name[4:]) in values
        if name == "tag-key":
            return any(k in values for k in r["tags"])
        fields = {
            "state": self.state_of(r),
            "instance-type": r["instance_type"],
            "availability-zone": r["zone"],
            "reservation-type": r["reservation_type"],
            "end-date-type": r["end_date_type"],
            "instance-match-criteria": r["match"],
            "owner-id": self.account_id,
        }
        if name not in fields:
            raise ApiError(400, "InvalidParameterValue", "The filter '%s' is invalid" % name)
        return fields[name] in values

    def find_locked(self, p):
        rid = p.get("CapacityReservationId")
        if not rid:
            raise ApiError(400, "MissingParameter", "CapacityReservationId is required.")
        if not rid.startswith("cr-"):
            raise ApiError(
                400,
                "InvalidCapacityReservationId.Malformed",
                "Invalid id: \"%s\" (expecting \"cr-...\")" % rid,
            )
        r = self.reservations.get(rid)
        if r is None:
            raise ApiError(
                400,
                "InvalidCapacityReservationId.NotFound",
                "The capacity reservation ID '%s' does not exist" % rid,
            )
        return r

    def do_ModifyCapacityReservation(self, p, _tags):
        r = self.find_locked(p)
        if r["reservation_type"] == "capacity-block":
            raise ApiError(
                400, "InvalidParameterValue", "You can't modify or cancel a Capacity Block."
            )
        state = self.state_of(r)
        if state not in ("active", "scheduled"):
            raise ApiError(
                400,
                "IncorrectState",
                "The capacity reservation '%s' is in state '%s' and cannot be modified."
                % (r["id"], state),
            )
        count = p.get("InstanceCount")
        if count is not None and int(count) > r["count"]:
            ice = self.ice_locked(r["instance_type"], r["zone"], "ModifyCapacityReservation")
            if ice:
                raise ice
        if bool_param(p, "DryRun"):
            raise dry_run()
        if count is not None:
            if int(count) < 1:
                raise ApiError(400, "InvalidParameterValue", "InstanceCount must be at least 1.")
            r["count"] = int(count)
        if p.get("EndDateType"):
            r["end_date_type"] = p["EndDateType"]
            if p["EndDateType"] == "unlimited":
                r["end"] = None
        if p.get("EndDate"):
            r["end"] = parse_time(p["EndDate"])
        return el("return", "true")

    def do_CancelCapacityReservation(self, p, _tags):
        r = self.find_locked(p)
        if r["reservation_type"] == "capacity-block":
            raise ApiError(
                400, "InvalidParameterValue", "You can't modify or cancel a Capacity Block."
            )
        state = self.state_of(r)
        if state not in ("active", "scheduled", "pending"):
            raise ApiError(
                400,
                "IncorrectState",
                "The capacity reservation '%s' is in state '%s' and cannot be cancelled."
                % (r["id"], state),
            )
        if bool_param(p, "DryRun"):
            raise dry_run()
        r["state"] = "cancelled"
        return el("return", "true")

    def add_locked(self, r):
        self.reservations[r["id"]] = r
        self.order.append(r["id"])

    def reservation_xml(self, r, state=None):
        state = state or self.state_of(r)
        in_use = min(max(int(r.get("in_use", 0)), 0), r["count"])
        available = r["count"] - in_use if state == "active" else 0
        parts = [
            el("capacityReservationId", r["id"]),
            el("ownerId", self.account_id),
            el(
                "capacityReservationArn",
                "arn:aws:ec2:%s:%s:capacity-reservation/%s"
                % (r["zone"][:-1], self.account_id, r["id"]),
            ),
            el("availabilityZoneId", r["zone"]),
            el("instanceType", r["instance_type"]),
            el("instancePlatform", r["platform"]),
            el("availabilityZone", r["zone"]),
            el("tenancy", "default"),
            el("totalInstanceCount", r["count"]),
            el("availableInstanceCount", available),
            el("ebsOptimized", "false"),
            el("ephemeralStorage", "false"),
            el("state", state),
            el("startDate", iso(r["start"])),
        ]
        if r["end"] is not None:
            parts.append(el("endDate", iso(r["end"])))
        parts += [
            el("endDateType", r["end_date_type"]),
            el("instanceMatchCriteria", r["match"]),
            el("createDate", iso(r["created"])),
            tag_set(r["tags"]),
            el("reservationType", r["reservation_type"]),
        ]
        if r.get("capacity_block_id"):
            parts.append(el("capacityBlockId", r["capacity_block_id"]))
        if r.get("delivery_preference"):
            parts.append(el("deliveryPreference", r["delivery_preference"]))
        return "".join(parts)


# ---- Query protocol helpers ------------------------------------------------------------------


def el(name, value):
    if value is None:
        return ""
    return "<%s>%s</%s>" % (name, escape(str(value)), name)


def tag_set(tags):
    items = "".join(
        "<item>" + el("key", k) + el("value", v) + "</item>" for k, v in sorted(tags.items())
    )
    return "<tagSet>" + items + "</tagSet>"


def bool_param(p, name):
    return p.get(name, "false").lower() == "true"


def dry_run():
    return ApiError(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")


def indexed(p, prefix):
    """`Prefix.1`, `Prefix.2`, ... in index order."""
    out = []
    n = 1
    while (prefix + "." + str(n)) in p:
        out.append(p[prefix + "." + str(n)])
        n += 1
    return out


def parse_filters(p):
    out = []
    n = 1
    while ("Filter.%d.Name" % n) in p:
        out.append((p["Filter.%d.Name" % n], indexed(p, "Filter.%d.Value" % n)))
        n += 1
    return out


def tag_specs(p):
    """Tags of every TagSpecification(s).N (both spellings exist in the EC2 model)."""
    tags = {}
    for prefix in ("TagSpecification", "TagSpecifications"):
        n = 1
        while any(k.startswith("%s.%d." % (prefix, n)) for k in p):
            m = 1
            while ("%s.%d.Tag.%d.Key" % (prefix, n, m)) in p:
                tags[p["%s.%d.Tag.%d.Key" % (prefix, n, m)]] = p.get(
                    "%s.%d.Tag.%d.Value" % (prefix, n, m), ""
                )
                m += 1
            n += 1
    return tags


def tag_resource_types(p):
    """The ResourceType of every TagSpecification(s).N, in order."""
    out = []
    for prefix in ("TagSpecification", "TagSpecifications"):
        n = 1
        while ("%s.%d.ResourceType" % (prefix, n)) in p:
            out.append(p["%s.%d.ResourceType" % (prefix, n)])
            n += 1
    return out


def error_xml(code, message, request_id, autoscaling=False):
    if autoscaling:
        kind = "Sender" if not code.startswith("Internal") else "Receiver"
        return (
            '<ErrorResponse xmlns="%s"><Error><Type>%s</Type>%s%s</Error>%s</ErrorResponse>'
            % (ASG_NS, kind, el("Code", code), el("Message", message), el("RequestId", request_id))
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>%s%s</Error></Errors>%s'
        "</Response>" % (el("Code", code), el("Message", message), el("RequestID", request_id))
    )


# ---- HTTP --------------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    server_version = "gpucap-ec2-capacity-peer"
    protocol_version = "HTTP/1.0"  # one request per connection: no pooled sockets to go stale

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass

    @property
    def peer(self):
        return self.server.peer

    def do_GET(self):
        if self.path.startswith("/_peer/record"):
            return self.json(200, self.peer.snapshot())
        self.dispatch(b"")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/_peer/"):
            return self.control(body)
        target = self.headers.get("X-Amz-Target") or ""
        if target.startswith(SERVICE_QUOTAS_PREFIX):
            return self.service_quotas(target[len(SERVICE_QUOTAS_PREFIX):], body)
        self.dispatch(body)

    def signed_region(self):
        """The region of the SigV4 credential scope (`Credential=AKID/DATE/REGION/SVC/...`)."""
        auth = self.headers.get("Authorization") or ""
        for part in auth.replace(",", " ").split():
            if part.startswith("Credential="):
                scope = part[len("Credential="):].split("/")
                if len(scope) >= 3:
                    return scope[2]
        return ""

    def service_quotas(self, op, body):
        request_id = str(uuid.uuid4())
        region = self.signed_region()
        try:
            doc = json.loads(body or b"{}")
        except ValueError:
            doc = {}
        code = doc.get("QuotaCode", "")
        with self.peer.lock:
            rec = self.peer.record
            rec["requests"] += 1
            call = rec["actions"].get(op, 0) + 1
            rec["actions"][op] = call
            rec["service_quota_calls"].append({"op": op, "region": region, "code": code})
        latency, fault = self.peer.transport_faults(op, call)
        if latency:
            time.sleep(latency)
        kind = fault["fault"] if fault else None
        if kind in ("reset", "drop_response"):
            return self.reset()
        if kind == "throttle":
            return self.json_error(400, "TooManyRequestsException", "Rate exceeded", request_id)
        if kind == "status":
            status = int(fault.get("status", 503))
            return self.json_error(
                status,
                fault.get("code") or "ServiceException",
                fault.get("message", "injected by the peer"),
                request_id,
            )
        if op not in ("GetServiceQuota", "GetAWSDefaultServiceQuota"):
            return self.json_error(400, "UnknownOperationException", "not served by the peer: " + op, request_id)
        service = doc.get("ServiceCode", "")
        with self.peer.lock:
            if op == "GetServiceQuota":
                value = self.peer.service_quotas.get(region, {}).get(code)
            else:
                value = self.peer.service_quota_defaults.get(code)
            account = self.peer.account_id
        if service != "ec2" or value is None:
            return self.json_error(
                400,
                "NoSuchResourceException",
                "The request failed because the specified service quota does not exist.",
                request_id,
            )
        quota = {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": "arn:aws:servicequotas:%s:%s:ec2/%s" % (region, account, code),
            "QuotaCode": code,
            "QuotaName": QUOTA_NAMES.get(code, code),
            "Value": value,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }
        data = json.dumps({"Quota": quota}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("x-amzn-RequestId", request_id)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def json_error(self, status, code, message, request_id):
        data = json.dumps({"__type": code, "message": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("x-amzn-RequestId", request_id)
        self.send_header("x-amzn-ErrorType", code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def control(self, body):
        try:
            doc = json.loads(body or b"{}")
            if self.path.startswith("/_peer/config"):
                self.peer.configure(doc)
            elif self.path.startswith("/_peer/faults"):
                self.peer.set_faults(doc)
            elif self.path.startswith("/_peer/reset"):
                with self.peer.lock:
                    self.peer.reset_locked()
            elif self.path.startswith("/_peer/clock"):
                at = parse_time(doc.get("now"))
                CLOCK["offset"] = (at - datetime.now(timezone.utc)) if at else timedelta(0)
            elif self.path.startswith("/_peer/usage"):
                with self.peer.lock:
                    for rid, n in doc.items():
                        self.peer.reservations[rid]["in_use"] = int(n)
            else:
                return self.json(404, {"error": "no such control endpoint %s" % self.path})
        except (ValueError, KeyError, TypeError) as e:
            return self.json(400, {"error": str(e)})
        self.json(200, {"ok": True})

    def json(self, status, doc):
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def dispatch(self, body):
        query = urllib.parse.urlsplit(self.path).query
        raw = body.decode("utf-8", "replace") + ("&" + query if query else "")
        p = {k: v[0] for k, v in urllib.parse.parse_qs(raw, keep_blank_values=True).items()}
        action = p.get("Action", "")
        autoscaling = p.get("Version") == "2011-01-01"
        request_id = str(uuid.uuid4())
        with self.peer.lock:
            rec = self.peer.record
            rec["requests"] += 1
            call = rec["actions"].get(action, 0) + 1
            rec["actions"][action] = call
        latency, fault = self.peer.transport_faults(action, call)
        if latency:
            time.sleep(latency)
        kind = fault["fault"] if fault else None
        if kind == "reset":
            return self.reset()
        if kind == "throttle":
            code = "Throttling" if autoscaling else "RequestLimitExceeded"
            msg = "Rate exceeded" if autoscaling else "Request limit exceeded."
            return self.xml(int(fault.get("status", 400)), error_xml(code, msg, request_id, autoscaling), request_id)
        if kind == "status":
            status = int(fault.get("status", 503))
            code = fault.get("code") or ("Unavailable" if status == 503 else "InternalError")
            msg = fault.get("message", "The service is unavailable. Please try again shortly.")
            return self.xml(status, error_xml(code, msg, request_id, autoscaling), request_id)

        if action in LOCAL_ACTIONS:
            try:
                inner = self.peer.handle(action, p)
                status = 200
                doc = '<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s">%s%s</%sResponse>' % (
                    action,
                    EC2_NS,
                    el("requestId", request_id),
                    inner,
                    action,
                )
            except ApiError as e:
                status, doc = e.status, error_xml(e.code, e.message, request_id)
            if kind == "drop_response":
                return self.reset()
            return self.xml(status, doc, request_id)

        if self.peer.upstream:
            with self.peer.lock:
                self.peer.record["forwarded"] += 1
            status, headers, data = self.forward(body)
            if kind == "drop_response":
                return self.reset()
            self.send_response(status)
            for k, v in headers:
                if k.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if kind == "drop_response":
            return self.reset()
        self.xml(
            400,
            error_xml(
                "InvalidAction",
                "The action %s is not valid for this web service (the gpucap capacity peer has "
                "no upstream)." % (action or "(none)"),
                request_id,
                autoscaling,
            ),
            request_id,
        )

    def forward(self, body):
        u = urllib.parse.urlsplit(self.peer.upstream)
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=120)
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() not in ("host", "connection", "content-length", "transfer-encoding")
        }
        headers["Host"] = u.netloc
        headers["Content-Length"] = str(len(body))
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, resp.getheaders(), data
        except OSError as e:
            msg = "upstream %s failed: %s" % (self.peer.upstream, e)
            return 502, [("Content-Type", "text/xml")], error_xml("InternalError", msg, "peer").encode()
        finally:
            conn.close()

    def xml(self, status, doc, request_id):
        data = doc.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/xml;charset=UTF-8")
        self.send_header("x-amzn-requestid", request_id)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reset(self):
        """Closes the connection with a TCP RST and writes nothing."""
        self.close_connection = True
        try:
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            self.connection.close()
        except OSError:
            pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that gave up (timeouts, resets) is not worth a traceback.
        pass


def watch_parent(parent):
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.2)


def watch_stdin():
    # The parent holds our stdin open; end of file means it is gone.
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description="gpucap's local EC2 capacity peer")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--upstream", default=None, help="forward other actions here (moto)")
    ap.add_argument("--config", default=None, help="JSON file with offerings")
    ap.add_argument(
        "--exit-on-stdin-eof",
        action="store_true",
        help="exit when stdin closes (the parent keeps a pipe open)",
    )
    args = ap.parse_args()

    peer = Peer(args.upstream.rstrip("/") if args.upstream else None)
    if args.config:
        with open(args.config) as f:
            peer.configure(json.load(f))
    server = Server(("127.0.0.1", args.port), Handler)
    server.peer = peer

    def stop(_signum, _frame):
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    if args.exit_on_stdin_eof:
        threading.Thread(target=watch_stdin, daemon=True).start()
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
