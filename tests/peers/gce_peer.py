#!/usr/bin/env python3
"""A local Compute Engine peer for gpucap's tests: an HTTP server that answers the zonal
reservation and zone operation APIs, and the regional instance template, managed instance
group, resize request (DWS flex-start) and region operation APIs (compute/v1, REST/JSON, the transport
google-cloud-compute-v1 speaks) in the documented JSON, runs their Operations
(PENDING -> RUNNING -> DONE, with or without error.errors[]), dedupes requestIds, keeps its
own record of everything created, and injects faults on request.

Why it exists: there is no Compute Engine emulator, and gpucap's apply must be tested against
rate limits, exhausted zones and a response lost after Compute Engine acted. The formats
replayed are summarised, with their sources, in docs/gce-reservations-api.md (reservations)
and docs/gce-pools-api.md (instance templates, managed instance groups).

Served (P = /compute/v1/projects/{project}):
  POST   P/zones/{z}/reservations?requestId=U        insert: 200 Operation (PENDING);
                                                    409 alreadyExists for a taken name; the
                                                    same requestId within `dedupe_seconds`
                                                    answers with the same Operation
  GET    P/zones/{z}/reservations/{r}                 the Reservation / 404 notFound
  GET    P/zones/{z}/reservations                     {"kind", "id", "items"?, "selfLink"}
  GET    P/aggregated/reservations                    {"items": {"zones/{z}": {"reservations"
                                                    | "warning"}}}
  POST   P/zones/{z}/reservations/{r}/resize?requestId=U   {"specificSkuCount": N}: Operation
  DELETE P/zones/{z}/reservations/{r}?requestId=U    Operation; 400 resourceInUseByAnotherResource
                                                    while instances use it
  GET    P/zones/{z}/operations/{op}                  the Operation (one step further)
  POST   P/zones/{z}/operations/{op}/wait             the Operation, one step further: it
                                                    returns early (RUNNING) before DONE,
                                                    as the real wait may

Pools (https://cloud.google.com/compute/docs/reference/rest/v1/regionInstanceTemplates,
https://cloud.google.com/compute/docs/reference/rest/v1/regionInstanceGroupManagers,
https://cloud.google.com/compute/docs/reference/rest/v1/regionOperations; read 2026-11-25):
  POST   P/regions/{r}/instanceTemplates?requestId=U   templates.insert: Operation; 409
                                                    alreadyExists for a taken name
  GET    P/regions/{r}/instanceTemplates/{t}           templates.get / 404
  POST   P/regions/{r}/instanceGroupManagers?requestId=U   groups.insert: Operation; 409; the
                                                    template must exist
  GET    P/regions/{r}/instanceGroupManagers            groups.list {"items"?: [...]}
  GET    P/regions/{r}/instanceGroupManagers/{g}        groups.get / 404
  POST   P/regions/{r}/instanceGroupManagers/{g}/resize?size=N&requestId=U
                                                    groups.resize: Operation; at DONE the
                                                    target size is N, new instances start
                                                    with currentAction CREATING
  POST   P/regions/{r}/instanceGroupManagers/{g}/listManagedInstances
                                                    groups.listManagedInstances
                                                    {"managedInstances": [...]}: an instance
                                                    is CREATING for `instance_steps` looks,
                                                    then currentAction NONE, instanceStatus
                                                    RUNNING; under a "stockout" it stays
                                                    CREATING with lastAttempt.errors.errors[]
  POST   P/regions/{r}/instanceGroupManagers/{g}/resizeRequests?requestId=U
                                                    resizeRequests.insert (DWS flex-start): the
                                                    group's template must be FLEX_START, resizeBy
                                                    >= 1, requestedRunDuration 10 min to 7 days;
                                                    the request is CREATING until its Operation is
                                                    DONE, then ACCEPTED (queued); 409 for a taken
                                                    name
  GET    P/regions/{r}/instanceGroupManagers/{g}/resizeRequests[/{rr}]   .list / .get
  POST   P/regions/{r}/instanceGroupManagers/{g}/resizeRequests/{rr}/cancel?requestId=U
                                                    resizeRequests.cancel: 400 conditionNotMet
                                                    unless ACCEPTED; CANCELLED at DONE
  DELETE P/regions/{r}/instanceGroupManagers/{g}/resizeRequests/{rr}?requestId=U
                                                    resizeRequests.delete: only an inactive one
  GET    P/regions/{r}/operations/{op}                  regionOperations.get
  POST   P/regions/{r}/operations/{op}/wait             regionOperations.wait (returns early)

An Operation takes `op_steps` observations (default 2: PENDING -> RUNNING -> DONE). A get or
wait of it is one; so is any read of the reservations in its zone (operations run whether
they are polled or not). Its effect (the reservation READY, resized or gone) lands at DONE.
Errors use Compute Engine's envelope {"error": {"code": N, "message", "errors": [{"message",
"domain", "reason"}]}}; a failed Operation carries {"error": {"errors": [{"code",
"message"}]}, "httpErrorStatusCode", "httpErrorMessage"}.

Future reservations in calendar mode and commitments
(https://cloud.google.com/compute/docs/reference/rest/v1/futureReservations,
https://cloud.google.com/compute/docs/reference/rest/v1/regionCommitments; read 2026-11-25):
  POST   P/zones/{z}/futureReservations?requestId=U   future.insert: Operation; 409 for a taken
                                                    name; the request exists from the insert on
                                                    (procurementStatus PENDING_APPROVAL)
  GET    P/zones/{z}/futureReservations/{f}           future.get / 404
  GET    P/zones/{z}/futureReservations               future.list {"items"?: [...]}
  GET    P/aggregated/futureReservations              future.aggregatedList {"items": {"zones/{z}":
                                                    {"futureReservations" | "warning"}}}
  POST   P/zones/{z}/futureReservations/{f}/cancel?requestId=U   future.cancel: Operation (at
                                                    DONE procurementStatus CANCELLED); 400 when
                                                    the start is less than 30 days after the
                                                    peer's clock, or the request is PROCURING or
                                                    later, or its lockTime has passed
  DELETE P/zones/{z}/futureReservations/{f}?requestId=U   future.delete: Operation; 400 unless
                                                    CANCELLED, DECLINED or past its end time
  POST   P/regions/{r}/commitments?requestId=U        commitments.insert: Operation; 409 for a
                                                    taken name; 400 for GPUs without attached
                                                    reservations; ACTIVE at DONE. There is no
                                                    delete (the API has none).
  GET    P/regions/{r}/commitments/{c}                commitments.get / 404
  GET    P/regions/{r}/commitments                    commitments.list {"items"?: [...]}
  GET    P/regions/{r}                                regions.get: {"kind": "compute#region",
                                                    "name", "status": "UP", "selfLink", "zones",
                                                    "quotas": [{"metric", "limit", "usage"}]}, the
                                                    quotas set by `region_quotas` (a region not set
                                                    answers 404 notFound)
                                                    (https://cloud.google.com/compute/docs/reference/rest/v1/regions/get,
                                                    read 2026-11-25; `limit` and `usage` are
                                                    numbers, as the API sends them)
  GET    P/aggregated/machineTypes                    machineTypes.aggregatedList: the items of
                                                    providers/gcp/tests/fixtures/
                                                    machine-types-aggregated-page1.json

Control API (JSON, not part of Compute Engine):
  GET  /_peer/record   {"requests": n, "calls": {OP: n}, "log": [...], "faults": [...],
                       "fault_counts": {}, "inserts": {name: n} (insert calls that made a new
                       Operation), "created": {name: n} (how often a reservation of that name
                       came into existence), "deleted": {name: n}, "resizes": {name: n},
                       "deduped": n, "reservations": [...] (as GET shows them),
                       "template_inserts"/"group_inserts": {name: n} (insert calls that made a
                       new Operation), "templates_created"/"groups_created": {name: n},
                       "group_resizes": {name: n}, "instance_templates": [...],
                       "instance_group_managers": [...] (as GET shows them, each with
                       "_running": the instances RUNNING with currentAction NONE)}
                       "future_inserts"/"commitment_inserts": {name: n} (insert calls that
                       made a new Operation), "futures_created"/"commitments_created": {name: n},
                       "future_cancels"/"future_deleted": {name: n}, "future_reservations": [...],
                       "commitments": [...] (as GET shows them),
                       "resize_request_inserts"/"resize_requests_created"/"resize_request_cancels":
                       {name: n}, "resize_requests": [...] (as GET shows them)
  POST /_peer/config   {"op_steps": 2, "dedupe_seconds": 3600, "instance_steps": 2, "now": RFC3339
                       (the peer's clock for the cancel rules; the real time when absent),
                       "region_quotas": {REGION: {METRIC: LIMIT}} (what regions.get lists),
                       "flex_steps": 0 (looks in the region after which a queued resize request
                       is fulfilled; 0: only when told)}
  POST /_peer/resize_request {"region", "group", "name"?, "state": "SUCCEEDED" | "FAILED", "code"?}:
                       Compute Engine finds the capacity (the group's target size grows by
                       resizeBy, its instances are created) or gives up (status.error)
  POST /_peer/future   {"zone", "name", "procurementStatus"?, "lockTime"?}: Google's review
                       moves a future reservation on (e.g. APPROVED, PROCURING)
  POST /_peer/faults   {"seed": 7, "rules": [RULE, ...]} replaces the rules
  POST /_peer/reset    forgets everything
  POST /_peer/usage    {"<reservation name>": N}: N instances use it from now on
  POST /_peer/seed     {"zone", "name", "machine_type", "count", "description"?} makes a READY
                       reservation as another client would; {"kind": "group", "region",
                       "name", "machine_type", "size"?, "description"?} an instance template
                       and a managed instance group of that name, as another client would;
                       {"kind": "resize_request", "region", "group", "name", "resizeBy"?,
                       "state"?, "description"?} a queued resize request on a group

A RULE is {"fault": KIND, ...}. OP names: `insert`, `get`, `list`, `aggregatedList`,
`resize`, `delete`, `operations.get`, `operations.wait`. Transport faults match on "op" (a
name, a list, or "*"/absent), optional "calls" (1-based indices of that op's calls),
"probability" (seeded) and "times":
  "throttle"       403 rateLimitExceeded (usageLimits); "status": 429 for the 429 form
  "status"         "status": 500|503|..., a Compute error envelope (reason "backendError",
                   or the rule's "reason" and "message", e.g. 403 "forbidden")
  "reset"          TCP reset before acting: nothing happened
  "latency"        sleeps "seconds" first
  "drop_response"  carries the call out, then resets the connection without an answer
State faults (on insert, resize to more):
  "pool_exhausted" {"zone"?, "machine_type"?, "code"?}: the Operation ends DONE with error
                   ZONE_RESOURCE_POOL_EXHAUSTED (or "code"), httpErrorStatusCode 503; nothing
                   is reserved
  "quota"          the Operation ends DONE with error QUOTA_EXCEEDED, httpErrorStatusCode 403
  "op_rate"        the Operation ends DONE with error RESOURCE_OPERATION_RATE_EXCEEDED
State fault on groups.resize (to more):
  "stockout"       {"group"?, "code"?}: the resize is DONE without error (it only sets the
                   target size) but the new instances stay CREATING, each with lastAttempt
                   error ZONE_RESOURCE_POOL_EXHAUSTED (or "code"), as a MIG shows a stockout

With GCE_PEER_REQUIRE_AUTH set in its environment, a request without `Authorization` is 401
(the tests run with anonymous credentials, which send none).

Usage: gce_peer.py [--port 0] [--exit-on-stdin-eof]. Binds 127.0.0.1, prints the port as the
first line of stdout. Python 3 standard library only.
"""

import argparse
import json
import os
import random
import re
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

TRANSPORT_FAULTS = {"throttle", "status", "reset", "latency", "drop_response"}
STATE_FAULTS = {"pool_exhausted", "quota", "op_rate"}
GROUP_FAULTS = {"stockout"}
BASE = "https://www.googleapis.com/compute/v1"
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")

ROUTES = [
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/reservations$"), "insert"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/reservations$"), "list"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/aggregated/reservations$"), "aggregatedList"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/reservations/(?P<r>[^/]+)$"), "get"),
    ("DELETE", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/reservations/(?P<r>[^/]+)$"), "delete"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/reservations/(?P<r>[^/]+)/resize$"), "resize"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/operations/(?P<op>[^/]+)$"), "operations.get"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/operations/(?P<op>[^/]+)/wait$"), "operations.wait"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceTemplates$"), "templates.insert"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceTemplates/(?P<t>[^/]+)$"), "templates.get"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers$"), "groups.insert"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers$"), "groups.list"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers/(?P<g>[^/]+)$"), "groups.get"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers/(?P<g>[^/]+)/resize$"), "groups.resize"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers/(?P<g>[^/]+)/listManagedInstances$"), "groups.listManagedInstances"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/futureReservations$"), "future.insert"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/futureReservations$"), "future.list"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/aggregated/futureReservations$"), "future.aggregatedList"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/futureReservations/(?P<f>[^/]+)$"), "future.get"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/futureReservations/(?P<f>[^/]+)/cancel$"), "future.cancel"),
    ("DELETE", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)/futureReservations/(?P<f>[^/]+)$"), "future.delete"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/commitments$"), "commitments.insert"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/commitments$"), "commitments.list"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/commitments/(?P<c>[^/]+)$"), "commitments.get"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/aggregated/machineTypes$"), "machineTypes.aggregatedList"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)$"), "regions.get"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers/(?P<g>[^/]+)/resizeRequests$"), "resizeRequests.insert"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers/(?P<g>[^/]+)/resizeRequests$"), "resizeRequests.list"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers/(?P<g>[^/]+)/resizeRequests/(?P<rr>[^/]+)$"), "resizeRequests.get"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers/(?P<g>[^/]+)/resizeRequests/(?P<rr>[^/]+)/cancel$"), "resizeRequests.cancel"),
    ("DELETE", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/instanceGroupManagers/(?P<g>[^/]+)/resizeRequests/(?P<rr>[^/]+)$"), "resizeRequests.delete"),
    ("GET", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/operations/(?P<op>[^/]+)$"), "regionOperations.get"),
    ("POST", re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<rg>[^/]+)/operations/(?P<op>[^/]+)/wait$"), "regionOperations.wait"),
]


def rfc3339(t=None):
    t = t or datetime.now(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03d-00:00" % (t.microsecond // 1000)


def parse_time(text):
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


MACHINE_TYPES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "providers", "gcp",
                             "tests", "fixtures", "machine-types-aggregated-page1.json")
COMMITMENT_PLANS = {"TWELVE_MONTH": 365, "THIRTY_SIX_MONTH": 3 * 365}
FUTURE_LOCKED = {"PROCURING", "PROVISIONING", "FULFILLED", "FAILED", "FAILED_PARTIALLY_FULFILLED"}
CANCEL_NOTICE_DAYS = 30


def new_id():
    return str(random.getrandbits(62))


class GceError(Exception):
    def __init__(self, status, reason, message, domain="global", extra=None):
        super().__init__(message)
        self.status, self.reason, self.message, self.domain = status, reason, message, domain
        self.extra = extra or {}

    def envelope(self):
        doc = {"error": {"code": self.status, "message": self.message,
                         "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}]}}
        doc["error"].update(self.extra)
        return doc


class Peer:
    def __init__(self):
        self.lock = threading.Lock()
        self.op_steps = 2
        self.region_quotas = {}  # region -> metric -> limit
        self.instance_steps = 2
        self.dedupe_seconds = 3600
        self.flex_steps = 0
        self.now = None
        self.reset_locked()

    def reset_locked(self):
        self.reservations = {}  # (project, zone, name) -> dict
        self.templates = {}  # (project, region, name) -> dict
        self.futures = {}  # (project, zone, name) -> dict
        self.commitments = {}  # (project, region, name) -> dict
        self.groups = {}  # (project, region, name) -> dict
        self.resize_requests = {}  # (project, region, group, name) -> dict
        self.operations = {}  # name -> dict
        self.request_ids = {}  # requestId -> (time, operation name)
        self.rules = []
        self.fired = []
        self.rng = random.Random(0)
        self.record = {"requests": 0, "calls": {}, "log": [], "faults": [], "fault_counts": {},
                       "inserts": {}, "created": {}, "deleted": {}, "resizes": {}, "deduped": 0,
                       "template_inserts": {}, "group_inserts": {}, "templates_created": {},
                       "groups_created": {}, "group_resizes": {},
                       "future_inserts": {}, "futures_created": {}, "future_cancels": {},
                       "future_deleted": {}, "commitment_inserts": {}, "commitments_created": {},
                       "resize_request_inserts": {}, "resize_requests_created": {},
                       "resize_request_cancels": {}}

    # ---- control -------------------------------------------------------------------------

    def configure(self, cfg):
        with self.lock:
            self.op_steps = max(1, int(cfg.get("op_steps", self.op_steps)))
            self.instance_steps = max(0, int(cfg.get("instance_steps", self.instance_steps)))
            self.dedupe_seconds = float(cfg.get("dedupe_seconds", self.dedupe_seconds))
            self.flex_steps = max(0, int(cfg.get("flex_steps", self.flex_steps)))
            if "now" in cfg:
                self.now = parse_time(cfg["now"]) if cfg["now"] else None
            if "region_quotas" in cfg:
                self.region_quotas = {
                    r: {m: float(v) for m, v in q.items()} for r, q in cfg["region_quotas"].items()
                }

    def region(self, project, region):
        """regions.get: the region with the quotas set for it."""
        with self.lock:
            quotas = self.region_quotas.get(region)
        if quotas is None:
            raise GceError(404, "notFound", "The resource 'projects/%s/regions/%s' was not found" % (project, region))
        return 200, {
            "kind": "compute#region",
            "id": str(1000 + sum(map(ord, region))),
            "name": region,
            "description": region,
            "status": "UP",
            "selfLink": "%s/projects/%s/regions/%s" % (BASE, project, region),
            "zones": ["%s/projects/%s/zones/%s-a" % (BASE, project, region)],
            "quotas": [{"metric": m, "limit": v, "usage": 0.0} for m, v in sorted(quotas.items())],
        }

    def set_faults(self, cfg):
        with self.lock:
            rules = cfg.get("rules", [])
            for r in rules:
                if r.get("fault") not in TRANSPORT_FAULTS | STATE_FAULTS | GROUP_FAULTS:
                    raise ValueError("unknown fault %r" % r.get("fault"))
            self.rules = rules
            self.fired = [0] * len(rules)
            self.rng = random.Random(cfg.get("seed", 0))

    def snapshot(self):
        with self.lock:
            doc = json.loads(json.dumps(self.record))
            doc["reservations"] = [self.view(r) for r in self.reservations.values()]
            doc["instance_templates"] = [self.template_view(t) for t in self.templates.values()]
            groups = []
            for g in self.groups.values():
                v = self.group_view(g)
                v["_running"] = sum(1 for i in g["instances"] if i["ready"])
                groups.append(v)
            doc["instance_group_managers"] = groups
            doc["future_reservations"] = [self.future_view(f) for f in self.futures.values()]
            doc["commitments"] = [self.commitment_view(c) for c in self.commitments.values()]
            doc["resize_requests"] = [self.rr_view(r) for r in self.resize_requests.values()]
            return doc

    def set_usage(self, doc):
        with self.lock:
            for name, n in doc.items():
                found = [r for r in self.reservations.values() if r["name"] == name]
                if not found:
                    raise KeyError("no reservation named %s" % name)
                for r in found:
                    r["in_use"] = int(n)

    def seed(self, doc):
        if doc.get("kind") == "group":
            return self.seed_group(doc)
        if doc.get("kind") == "resize_request":
            return self.seed_resize_request(doc)
        with self.lock:
            r = self.new_reservation_locked(doc.get("project", "gpucap-test"), doc["zone"], doc["name"],
                                            doc["machine_type"], int(doc.get("count", 1)),
                                            doc.get("description"), None)
            r["status"] = "READY"
            return {"selfLink": r["selfLink"]}

    # ---- faults --------------------------------------------------------------------------

    def count_fault_locked(self, op, call, kind):
        self.record["faults"].append({"op": op, "call": call, "fault": kind})
        self.record["fault_counts"][kind] = self.record["fault_counts"].get(kind, 0) + 1

    def transport_faults(self, op, call):
        latency, fault = 0.0, None
        with self.lock:
            for i, rule in enumerate(self.rules):
                kind = rule["fault"]
                if kind not in TRANSPORT_FAULTS:
                    continue
                want = rule.get("op", "*")
                if want != "*" and op not in (want if isinstance(want, list) else [want]):
                    continue
                if "calls" in rule and call not in rule["calls"]:
                    continue
                if "times" in rule and self.fired[i] >= int(rule["times"]):
                    continue
                if "probability" in rule and self.rng.random() >= float(rule["probability"]):
                    continue
                if kind == "latency":
                    latency += float(rule.get("seconds", 1))
                elif fault is None:
                    fault = rule
                else:
                    continue
                self.fired[i] += 1
                self.count_fault_locked(op, call, kind)
        return latency, fault

    def group_fault_locked(self, group):
        for i, rule in enumerate(self.rules):
            if rule["fault"] not in GROUP_FAULTS:
                continue
            if "group" in rule and rule["group"] != group:
                continue
            if "times" in rule and self.fired[i] >= int(rule["times"]):
                continue
            self.fired[i] += 1
            self.count_fault_locked("state", 0, rule["fault"])
            return rule
        return None

    def state_fault_locked(self, zone, machine_type):
        for i, rule in enumerate(self.rules):
            if rule["fault"] not in STATE_FAULTS:
                continue
            if "zone" in rule and rule["zone"] != zone:
                continue
            if "machine_type" in rule and rule["machine_type"] != machine_type:
                continue
            if "times" in rule and self.fired[i] >= int(rule["times"]):
                continue
            self.fired[i] += 1
            self.count_fault_locked("state", 0, rule["fault"])
            return rule
        return None

    # ---- resources -----------------------------------------------------------------------

    def zone_link(self, project, zone):
        return "%s/projects/%s/zones/%s" % (BASE, project, zone)

    def new_reservation_locked(self, project, zone, name, machine_type, count, description, delete_at):
        r = {"project": project, "zone": zone, "name": name, "machine_type": machine_type,
             "count": count, "in_use": 0, "description": description, "delete_at": delete_at,
             "status": "CREATING", "id": new_id(), "created": rfc3339(),
             "selfLink": "%s/reservations/%s" % (self.zone_link(project, zone), name)}
        self.reservations[(project, zone, name)] = r
        self.record["created"][name] = self.record["created"].get(name, 0) + 1
        return r

    def view(self, r):
        doc = {
            "kind": "compute#reservation",
            "id": r["id"],
            "creationTimestamp": r["created"],
            "selfLink": r["selfLink"],
            "zone": self.zone_link(r["project"], r["zone"]),
            "name": r["name"],
            "specificReservation": {
                "instanceProperties": {"machineType": r["machine_type"]},
                "count": str(r["count"]),
                "inUseCount": str(r["in_use"]),
                "assuredCount": str(r["count"]),
            },
            "specificReservationRequired": False,
            "status": r["status"],
            "satisfiesPzs": False,
        }
        if r["description"] is not None:
            doc["description"] = r["description"]
        if r["delete_at"]:
            doc["deleteAtTime"] = r["delete_at"]
        return doc

    # ---- operations ----------------------------------------------------------------------

    def new_operation_locked(self, project, zone, kind, target, effect, request_id, failure=None,
                             region=None, collection="reservations"):
        name = "operation-%d-%s" % (int(time.time() * 1000), uuid.uuid4().hex[:24])
        op = {"name": name, "project": project, "zone": zone, "region": region, "kind": kind,
              "target": target, "collection": collection,
              "effect": effect, "failure": failure, "step": 0, "request_id": request_id,
              "id": new_id(), "insert": rfc3339(), "start": None, "end": None}
        self.operations[name] = op
        if request_id:
            self.request_ids[request_id] = (time.time(), name)
        return op

    def advance_locked(self, op):
        if op["step"] >= self.op_steps:
            return
        op["step"] += 1
        if op["start"] is None:
            op["start"] = rfc3339()
        if op["step"] >= self.op_steps:
            op["end"] = rfc3339()
            if op["failure"] is None and op["effect"]:
                op["effect"]()

    def advance_zone_locked(self, project, zone):
        for op in list(self.operations.values()):
            if op["project"] == project and op["region"] is None and (zone is None or op["zone"] == zone):
                self.advance_locked(op)

    def advance_region_locked(self, project, region):
        """Regional Operations run whether they are polled or not: a read in the region is a
        step. So does the creation of the region's group instances."""
        for op in list(self.operations.values()):
            if op["project"] == project and op["region"] == region:
                self.advance_locked(op)
        for (rp, rr_region, _, _), r in list(self.resize_requests.items()):
            if (rp, rr_region) == (project, region) and r["state"] == "ACCEPTED" and self.flex_steps > 0:
                r["step"] += 1
                if r["step"] >= self.flex_steps:
                    self.fulfil_locked(r)
        for (gp, gr, _), g in self.groups.items():
            if (gp, gr) == (project, region):
                for i in g["instances"]:
                    if not i["ready"] and i["error"] is None:
                        i["step"] += 1
                        if i["step"] >= self.instance_steps:
                            i["ready"] = True

    def op_view(self, op):
        status = "PENDING" if op["step"] == 0 else ("DONE" if op["step"] >= self.op_steps else "RUNNING")
        if op["region"] is None:
            zl = self.zone_link(op["project"], op["zone"])
            scope = {"zone": zl}
        else:
            zl = self.region_link(op["project"], op["region"])
            scope = {"region": zl}
        doc = {
            "kind": "compute#operation",
            "id": op["id"],
            "name": op["name"],
            "operationType": op["kind"],
            "targetLink": "%s/%s/%s" % (zl, op["collection"], op["target"]),
            "targetId": new_id(),
            "status": status,
            "user": "gpucap-test@example.iam.gserviceaccount.com",
            "progress": 100 if status == "DONE" else 0,
            "insertTime": op["insert"],
            "selfLink": "%s/operations/%s" % (zl, op["name"]),
        }
        doc.update(scope)
        if op["request_id"]:
            doc["clientOperationId"] = op["request_id"]
        if op["start"]:
            doc["startTime"] = op["start"]
        if status == "DONE":
            doc["endTime"] = op["end"]
            if op["failure"]:
                code, message, http, http_message = op["failure"]
                doc["error"] = {"errors": [{"code": code, "message": message}]}
                doc["httpErrorStatusCode"] = http
                doc["httpErrorMessage"] = http_message
        return doc

    def failure_of(self, rule, zone, machine_type):
        kind = rule["fault"]
        if kind == "pool_exhausted":
            code = rule.get("code", "ZONE_RESOURCE_POOL_EXHAUSTED")
            return (code, "The zone '%s' does not have enough resources available to fulfill the request. "
                          "'(resource type:compute)'." % zone, 503, "SERVICE UNAVAILABLE")
        if kind == "quota":
            return ("QUOTA_EXCEEDED", "Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 0.0 in region %s." % zone.rsplit("-", 1)[0],
                    403, "FORBIDDEN")
        return ("RESOURCE_OPERATION_RATE_EXCEEDED",
                "Operation rate exceeded for resource '%s'. Too frequent operations from the source resource." % machine_type,
                403, "FORBIDDEN")

    def deduped_locked(self, request_id):
        if not request_id:
            return None
        seen = self.request_ids.get(request_id)
        if seen and time.time() - seen[0] <= self.dedupe_seconds and seen[1] in self.operations:
            self.record["deduped"] += 1
            return self.operations[seen[1]]
        return None

    # ---- the API -------------------------------------------------------------------------

    def check_request_id(self, query):
        rid = query.get("requestId")
        if rid is None:
            return None
        try:
            u = uuid.UUID(rid)
        except ValueError:
            raise GceError(400, "invalid", "Invalid value for field 'requestId': '%s'. Must be a valid UUID." % rid)
        if u.int == 0:
            raise GceError(400, "invalid", "Invalid value for field 'requestId': '%s'. Zero UUID is not supported." % rid)
        return rid

    def insert(self, p, z, query, body):
        rid = self.check_request_id(query)
        doc = json.loads(body or b"{}")
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            name = doc.get("name") or ""
            if not NAME_RE.match(name):
                raise GceError(400, "invalid", "Invalid value for field 'resource.name': '%s'. Must be a match of "
                                               "regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'" % name)
            spec = doc.get("specificReservation") or {}
            count = int(spec.get("count") or 0)
            machine = (spec.get("instanceProperties") or {}).get("machineType")
            if count < 1 or not machine:
                raise GceError(400, "invalid", "Invalid value for field 'resource.specificReservation'.")
            if (p, z, name) in self.reservations:
                raise GceError(409, "alreadyExists",
                               "The resource 'projects/%s/zones/%s/reservations/%s' already exists" % (p, z, name))
            self.record["inserts"][name] = self.record["inserts"].get(name, 0) + 1
            rule = self.state_fault_locked(z, machine)
            if rule:
                op = self.new_operation_locked(p, z, "insert", name, None, rid, self.failure_of(rule, z, machine))
                return 200, self.op_view(op)
            r = self.new_reservation_locked(p, z, name, machine, count, doc.get("description"), doc.get("deleteAtTime"))

            def ready():
                r["status"] = "READY"
            op = self.new_operation_locked(p, z, "insert", name, ready, rid)
            return 200, self.op_view(op)

    def reservation_locked(self, p, z, r):
        found = self.reservations.get((p, z, r))
        if found is None:
            raise GceError(404, "notFound", "The resource 'projects/%s/zones/%s/reservations/%s' was not found" % (p, z, r))
        return found

    def get(self, p, z, r):
        with self.lock:
            self.advance_zone_locked(p, z)
            return 200, self.view(self.reservation_locked(p, z, r))

    def list(self, p, z):
        with self.lock:
            self.advance_zone_locked(p, z)
            items = [self.view(r) for (rp, rz, _), r in sorted(self.reservations.items()) if (rp, rz) == (p, z)]
            doc = {"kind": "compute#reservationList", "id": "projects/%s/zones/%s/reservations" % (p, z),
                   "selfLink": "%s/reservations" % self.zone_link(p, z)}
            if items:
                doc["items"] = items
            return 200, doc

    def aggregated(self, p):
        with self.lock:
            self.advance_zone_locked(p, None)
            zones = sorted({rz for (rp, rz, _) in self.reservations if rp == p} | {"us-central1-a", "us-central1-b"})
            items = {}
            for z in zones:
                found = [self.view(r) for (rp, rz, _), r in sorted(self.reservations.items()) if (rp, rz) == (p, z)]
                if found:
                    items["zones/" + z] = {"reservations": found}
                else:
                    items["zones/" + z] = {"warning": {
                        "code": "NO_RESULTS_ON_PAGE",
                        "message": "There are no results for scope 'zones/%s' on this page." % z,
                        "data": [{"key": "scope", "value": "zones/" + z}]}}
            return 200, {"kind": "compute#reservationAggregatedList", "id": "projects/%s/aggregated/reservations" % p,
                         "items": items, "selfLink": "%s/projects/%s/aggregated/reservations" % (BASE, p)}

    def resize(self, p, z, rname, query, body):
        rid = self.check_request_id(query)
        doc = json.loads(body or b"{}")
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            r = self.reservation_locked(p, z, rname)
            n = int(doc.get("specificSkuCount") or 0)
            if n < 1 or n > 1000:
                raise GceError(400, "invalid", "Invalid value for field 'specificSkuCount': '%s'." % n)
            self.record["resizes"][rname] = self.record["resizes"].get(rname, 0) + 1
            rule = self.state_fault_locked(z, r["machine_type"]) if n > r["count"] else None
            if rule:
                op = self.new_operation_locked(p, z, "resize", rname, None, rid,
                                               self.failure_of(rule, z, r["machine_type"]))
                return 200, self.op_view(op)
            r["status"] = "UPDATING"

            def resized():
                r["count"] = n
                r["status"] = "READY"
            op = self.new_operation_locked(p, z, "resize", rname, resized, rid)
            return 200, self.op_view(op)

    def delete(self, p, z, rname, query):
        rid = self.check_request_id(query)
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            r = self.reservation_locked(p, z, rname)
            if r["in_use"] > 0:
                raise GceError(400, "resourceInUseByAnotherResource",
                               "The reservation '%s' is in use by %d instance(s)." % (rname, r["in_use"]))
            r["status"] = "DELETING"

            def gone():
                if self.reservations.pop((p, z, rname), None) is not None:
                    self.record["deleted"][rname] = self.record["deleted"].get(rname, 0) + 1
            op = self.new_operation_locked(p, z, "delete", rname, gone, rid)
            return 200, self.op_view(op)

    # ---- pools: regional instance templates and managed instance groups ------------------

    def region_link(self, project, region):
        return "%s/projects/%s/regions/%s" % (BASE, project, region)

    def template_view(self, t):
        rl = self.region_link(t["project"], t["region"])
        doc = {"kind": "compute#instanceTemplate", "id": t["id"], "creationTimestamp": t["created"],
               "name": t["name"], "properties": t["properties"], "region": rl,
               "selfLink": "%s/instanceTemplates/%s" % (rl, t["name"])}
        if t["description"] is not None:
            doc["description"] = t["description"]
        return doc

    def instance_view(self, g, i):
        zl = self.zone_link(g["project"], i["zone"])
        doc = {"instance": "%s/instances/%s" % (zl, i["name"]), "name": i["name"],
               "version": {"instanceTemplate": g["instanceTemplate"]}}
        if i["ready"]:
            doc.update({"id": i["id"], "currentAction": "NONE", "instanceStatus": "RUNNING",
                        "targetStatus": "RUNNING"})
        else:
            doc["currentAction"] = "CREATING"
            if i["error"]:
                code, message = i["error"]
                doc["lastAttempt"] = {"errors": {"errors": [{"code": code, "message": message}]}}
        return doc

    def group_view(self, g):
        rl = self.region_link(g["project"], g["region"])
        ready = sum(1 for i in g["instances"] if i["ready"])
        creating = len(g["instances"]) - ready
        doc = {"kind": "compute#instanceGroupManager", "id": g["id"], "creationTimestamp": g["created"],
               "name": g["name"], "region": rl, "instanceTemplate": g["instanceTemplate"],
               "versions": [{"instanceTemplate": g["instanceTemplate"]}],
               "instanceGroup": "%s/instanceGroups/%s" % (rl, g["name"]),
               "baseInstanceName": g["baseInstanceName"], "fingerprint": "42WmSpB8rSM=",
               "currentActions": {"abandoning": 0, "creating": creating, "creatingWithoutRetries": 0,
                                  "deleting": 0, "none": ready, "recreating": 0, "refreshing": 0,
                                  "restarting": 0, "resuming": 0, "starting": 0, "stopping": 0,
                                  "suspending": 0, "verifying": 0},
               "status": {"isStable": creating == 0, "stateful": {"hasStatefulConfig": False},
                          "versionTarget": {"isReached": True}},
               "targetSize": g["targetSize"],
               "selfLink": "%s/instanceGroupManagers/%s" % (rl, g["name"]),
               "distributionPolicy": g["distributionPolicy"],
               "updatePolicy": g["updatePolicy"]}
        if g["description"] is not None:
            doc["description"] = g["description"]
        if g.get("instanceLifecyclePolicy"):
            doc["instanceLifecyclePolicy"] = g["instanceLifecyclePolicy"]
        return doc

    def seed_group(self, doc):
        p, rg, name = doc.get("project", "gpucap-test"), doc["region"], doc["name"]
        with self.lock:
            self.templates[(p, rg, name)] = {
                "project": p, "region": rg, "name": name, "description": doc.get("description"),
                "properties": {"machineType": doc["machine_type"]}, "id": new_id(), "created": rfc3339()}
            size = int(doc.get("size", 0))
            g = {"project": p, "region": rg, "name": name, "description": doc.get("description"),
                 "instanceTemplate": "%s/instanceTemplates/%s" % (self.region_link(p, rg), name),
                 "baseInstanceName": name[:58], "targetSize": size,
                 "distributionPolicy": {"targetShape": "EVEN", "zones": [{"zone": self.zone_link(p, rg + "-a")}]},
                 "updatePolicy": {}, "id": new_id(), "created": rfc3339(),
                 "instances": [{"name": "%s-%04d" % (name[:50], k), "zone": rg + "-a", "id": new_id(),
                                "step": 0, "ready": True, "error": None} for k in range(size)]}
            self.groups[(p, rg, name)] = g
            return {"selfLink": "%s/instanceGroupManagers/%s" % (self.region_link(p, rg), name)}

    def check_name(self, name):
        if not NAME_RE.match(name or ""):
            raise GceError(400, "invalid", "Invalid value for field 'resource.name': '%s'. Must be a match of "
                                           "regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'" % name)

    def template_insert(self, p, rg, query, body):
        rid = self.check_request_id(query)
        doc = json.loads(body or b"{}")
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            name = doc.get("name") or ""
            self.check_name(name)
            props = doc.get("properties") or {}
            if not props.get("machineType"):
                raise GceError(400, "invalid", "Invalid value for field 'resource.properties.machineType': ''.")
            if (p, rg, name) in self.templates:
                raise GceError(409, "alreadyExists",
                               "The resource 'projects/%s/regions/%s/instanceTemplates/%s' already exists" % (p, rg, name))
            self.record["template_inserts"][name] = self.record["template_inserts"].get(name, 0) + 1
            t = {"project": p, "region": rg, "name": name, "description": doc.get("description"),
                 "properties": props, "id": new_id(), "created": rfc3339()}
            # The name is taken from the insert on (a second insert is 409), as Compute Engine does.
            self.templates[(p, rg, name)] = t
            self.record["templates_created"][name] = self.record["templates_created"].get(name, 0) + 1
            op = self.new_operation_locked(p, None, "insert", name, None, rid, region=rg,
                                           collection="instanceTemplates")
            return 200, self.op_view(op)

    def template_get(self, p, rg, name):
        with self.lock:
            self.advance_region_locked(p, rg)
            t = self.templates.get((p, rg, name))
            if t is None:
                raise GceError(404, "notFound",
                               "The resource 'projects/%s/regions/%s/instanceTemplates/%s' was not found" % (p, rg, name))
            return 200, self.template_view(t)

    def group_insert(self, p, rg, query, body):
        rid = self.check_request_id(query)
        doc = json.loads(body or b"{}")
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            name = doc.get("name") or ""
            self.check_name(name)
            base = doc.get("baseInstanceName") or ""
            if not base or len(base) > 58:
                raise GceError(400, "invalid", "Invalid value for field 'resource.baseInstanceName': '%s'." % base)
            template = doc.get("instanceTemplate") or ""
            tname = template.rsplit("/", 1)[-1]
            if "/regions/%s/instanceTemplates/" % rg not in "/" + template or (p, rg, tname) not in self.templates:
                raise GceError(400, "invalid", "Invalid value for field 'resource.instanceTemplate': '%s'. "
                                               "The referenced instance template does not exist." % template)
            if (p, rg, name) in self.groups:
                raise GceError(409, "alreadyExists",
                               "The resource 'projects/%s/regions/%s/instanceGroupManagers/%s' already exists" % (p, rg, name))
            self.record["group_inserts"][name] = self.record["group_inserts"].get(name, 0) + 1
            asked = doc.get("distributionPolicy") or {}
            zones = [z.get("zone", "").rsplit("/", 1)[-1] for z in asked.get("zones", [])]
            policy = {"targetShape": asked.get("targetShape", "EVEN"),
                      "zones": [{"zone": self.zone_link(p, z)} for z in (zones or [rg + "-a", rg + "-b", rg + "-c"])]}
            g = {"project": p, "region": rg, "name": name, "description": doc.get("description"),
                 "instanceTemplate": "%s/instanceTemplates/%s" % (self.region_link(p, rg), tname),
                 "baseInstanceName": base, "targetSize": int(doc.get("targetSize") or 0),
                 "distributionPolicy": policy, "updatePolicy": doc.get("updatePolicy") or {},
                 "instanceLifecyclePolicy": doc.get("instanceLifecyclePolicy"),
                 "instances": [], "id": new_id(), "created": rfc3339()}
            self.groups[(p, rg, name)] = g
            self.record["groups_created"][name] = self.record["groups_created"].get(name, 0) + 1
            op = self.new_operation_locked(p, None, "insert", name, None, rid, region=rg,
                                           collection="instanceGroupManagers")
            return 200, self.op_view(op)

    def group_locked(self, p, rg, name):
        g = self.groups.get((p, rg, name))
        if g is None:
            raise GceError(404, "notFound",
                           "The resource 'projects/%s/regions/%s/instanceGroupManagers/%s' was not found" % (p, rg, name))
        return g

    def group_get(self, p, rg, name):
        with self.lock:
            self.advance_region_locked(p, rg)
            return 200, self.group_view(self.group_locked(p, rg, name))

    def group_list(self, p, rg):
        with self.lock:
            self.advance_region_locked(p, rg)
            items = [self.group_view(g) for (gp, gr, _), g in sorted(self.groups.items()) if (gp, gr) == (p, rg)]
            doc = {"kind": "compute#regionInstanceGroupManagerList",
                   "id": "projects/%s/regions/%s/instanceGroupManagers" % (p, rg),
                   "selfLink": "%s/instanceGroupManagers" % self.region_link(p, rg)}
            if items:
                doc["items"] = items
            return 200, doc

    def group_resize(self, p, rg, name, query):
        rid = self.check_request_id(query)
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            g = self.group_locked(p, rg, name)
            try:
                n = int(query.get("size", ""))
            except ValueError:
                raise GceError(400, "required", "Required field 'size' not specified")
            if n < 0:
                raise GceError(400, "invalid", "Invalid value for field 'size': '%d'." % n)
            self.record["group_resizes"][name] = self.record["group_resizes"].get(name, 0) + 1
            rule = self.group_fault_locked(name) if n > g["targetSize"] else None

            def resized():
                g["targetSize"] = n
                g["instances"] = g["instances"][:n]
                zone = g["distributionPolicy"]["zones"][0]["zone"].rsplit("/", 1)[-1]
                while len(g["instances"]) < n:
                    error = None
                    if rule:
                        code = rule.get("code", "ZONE_RESOURCE_POOL_EXHAUSTED")
                        error = (code, "The zone 'projects/%s/zones/%s' does not have enough resources available "
                                       "to fulfill the request.  Try a different zone, or try again later." % (p, zone))
                    g["instances"].append({"name": "%s-%s" % (g["baseInstanceName"], uuid.uuid4().hex[:4]),
                                           "zone": zone, "id": new_id(), "step": 0,
                                           "ready": self.instance_steps == 0 and error is None, "error": error})
            op = self.new_operation_locked(p, None, "compute.instanceGroupManagers.resize", name, resized, rid,
                                           region=rg, collection="instanceGroupManagers")
            return 200, self.op_view(op)

    def group_instances(self, p, rg, name):
        with self.lock:
            self.advance_region_locked(p, rg)
            g = self.group_locked(p, rg, name)
            return 200, {"managedInstances": [self.instance_view(g, i) for i in g["instances"]]}

    # ---- resize requests (DWS flex-start) ----------------------------------------------------

    def rr_view(self, r):
        rl = self.region_link(r["project"], r["region"])
        doc = {"kind": "compute#instanceGroupManagerResizeRequest", "id": r["id"],
               "creationTimestamp": r["created"], "name": r["name"], "region": rl,
               "resizeBy": r["resizeBy"], "requestedRunDuration": {"seconds": str(r["seconds"])},
               "state": r["state"], "status": {},
               "selfLink": "%s/instanceGroupManagers/%s/resizeRequests/%s" % (rl, r["group"], r["name"])}
        if r["description"] is not None:
            doc["description"] = r["description"]
        if r["error"]:
            code, message = r["error"]
            doc["status"] = {"error": {"errors": [{"code": code, "message": message}]}}
        return doc

    def fulfil_locked(self, r):
        """Capacity found: every instance at once, the group's target size grows by resizeBy."""
        g = self.groups.get((r["project"], r["region"], r["group"]))
        if g is None:
            return
        r["state"] = "SUCCEEDED"
        zone = g["distributionPolicy"]["zones"][0]["zone"].rsplit("/", 1)[-1]
        g["targetSize"] += r["resizeBy"]
        for _ in range(r["resizeBy"]):
            g["instances"].append({"name": "%s-%s" % (g["baseInstanceName"], uuid.uuid4().hex[:4]),
                                   "zone": zone, "id": new_id(), "step": 0,
                                   "ready": self.instance_steps == 0, "error": None})

    def rr_locked(self, p, rg, g, name):
        r = self.resize_requests.get((p, rg, g, name))
        if r is None:
            raise GceError(404, "notFound", "The resource 'projects/%s/regions/%s/instanceGroupManagers/%s/resizeRequests/%s' "
                                            "was not found" % (p, rg, g, name))
        return r

    def rr_insert(self, p, rg, gname, query, body):
        rid = self.check_request_id(query)
        doc = json.loads(body or b"{}")
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            g = self.group_locked(p, rg, gname)
            name = doc.get("name") or ""
            self.check_name(name)
            tname = g["instanceTemplate"].rsplit("/", 1)[-1]
            t = self.templates.get((p, rg, tname)) or {}
            model = ((t.get("properties") or {}).get("scheduling") or {}).get("provisioningModel")
            if model != "FLEX_START":
                raise GceError(400, "invalid", "Invalid resource usage: the instance template of '%s' must use the "
                                               "FLEX_START provisioning model for a resize request." % gname)
            try:
                n = int(doc.get("resizeBy") or 0)
                seconds = int((doc.get("requestedRunDuration") or {}).get("seconds") or 0)
            except ValueError:
                raise GceError(400, "invalid", "Invalid value for field 'resource.resizeBy'.")
            if n < 1:
                raise GceError(400, "invalid", "Invalid value for field 'resource.resizeBy': '%d'." % n)
            if not 600 <= seconds <= 7 * 24 * 3600:
                raise GceError(400, "invalid", "Invalid value for field 'resource.requestedRunDuration': '%ds'. "
                                               "Must be between 10 minutes and 7 days." % seconds)
            if (p, rg, gname, name) in self.resize_requests:
                raise GceError(409, "alreadyExists", "The resource 'projects/%s/regions/%s/instanceGroupManagers/%s/"
                                                     "resizeRequests/%s' already exists" % (p, rg, gname, name))
            self.record["resize_request_inserts"][name] = self.record["resize_request_inserts"].get(name, 0) + 1
            r = {"project": p, "region": rg, "group": gname, "name": name, "description": doc.get("description"),
                 "resizeBy": n, "seconds": seconds, "state": "CREATING", "step": 0, "error": None,
                 "id": new_id(), "created": rfc3339()}
            # The name is taken from the insert on; the request is queued (ACCEPTED) at DONE.
            self.resize_requests[(p, rg, gname, name)] = r
            self.record["resize_requests_created"][name] = self.record["resize_requests_created"].get(name, 0) + 1

            def accepted():
                if r["state"] == "CREATING":
                    r["state"] = "ACCEPTED"
            op = self.new_operation_locked(p, None, "insert", "%s/resizeRequests/%s" % (gname, name), accepted, rid,
                                           region=rg, collection="instanceGroupManagers")
            return 200, self.op_view(op)

    def rr_get(self, p, rg, gname, name):
        with self.lock:
            self.advance_region_locked(p, rg)
            return 200, self.rr_view(self.rr_locked(p, rg, gname, name))

    def rr_list(self, p, rg, gname):
        with self.lock:
            self.advance_region_locked(p, rg)
            self.group_locked(p, rg, gname)
            items = [self.rr_view(r) for (rp, rr_region, g, _), r in sorted(self.resize_requests.items())
                     if (rp, rr_region, g) == (p, rg, gname)]
            doc = {"kind": "compute#regionInstanceGroupManagerResizeRequestList",
                   "id": "projects/%s/regions/%s/instanceGroupManagers/%s/resizeRequests" % (p, rg, gname),
                   "selfLink": "%s/instanceGroupManagers/%s/resizeRequests" % (self.region_link(p, rg), gname)}
            if items:
                doc["items"] = items
            return 200, doc

    def rr_cancel(self, p, rg, gname, name, query):
        rid = self.check_request_id(query)
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            r = self.rr_locked(p, rg, gname, name)
            if r["state"] != "ACCEPTED":
                raise GceError(400, "conditionNotMet", "The resize request '%s' is in state %s; only an ACCEPTED "
                                                       "resize request can be cancelled." % (name, r["state"]))
            self.record["resize_request_cancels"][name] = self.record["resize_request_cancels"].get(name, 0) + 1

            def cancelled():
                if r["state"] == "ACCEPTED":
                    r["state"] = "CANCELLED"
            op = self.new_operation_locked(p, None, "cancel", "%s/resizeRequests/%s" % (gname, name), cancelled, rid,
                                           region=rg, collection="instanceGroupManagers")
            return 200, self.op_view(op)

    def rr_delete(self, p, rg, gname, name, query):
        rid = self.check_request_id(query)
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            r = self.rr_locked(p, rg, gname, name)
            if r["state"] in ("CREATING", "ACCEPTED"):
                raise GceError(400, "conditionNotMet", "The resize request '%s' is active; only an inactive resize "
                                                       "request can be deleted." % name)

            def gone():
                self.resize_requests.pop((p, rg, gname, name), None)
            op = self.new_operation_locked(p, None, "delete", "%s/resizeRequests/%s" % (gname, name), gone, rid,
                                           region=rg, collection="instanceGroupManagers")
            return 200, self.op_view(op)

    def rr_review(self, doc):
        """Google's side of a queued request: capacity found (SUCCEEDED) or given up (FAILED)."""
        p = doc.get("project", "gpucap-test")
        with self.lock:
            matches = [r for (rp, rg, g, n), r in self.resize_requests.items()
                       if rp == p and rg == doc["region"] and g == doc["group"] and n == doc.get("name", n)]
            if not matches:
                raise KeyError("no resize request on %s" % doc["group"])
            for r in matches:
                if doc["state"] == "SUCCEEDED":
                    self.fulfil_locked(r)
                elif doc["state"] == "FAILED":
                    r["state"] = "FAILED"
                    r["error"] = (doc.get("code", "ZONE_RESOURCE_POOL_EXHAUSTED"),
                                  "The resize request could not be fulfilled before its time ran out.")
                else:
                    r["state"] = doc["state"]

    def seed_resize_request(self, doc):
        """A queued request on a group, as another client would make it."""
        p = doc.get("project", "gpucap-test")
        with self.lock:
            g = self.group_locked(p, doc["region"], doc["group"])
            name = doc["name"]
            self.resize_requests[(p, doc["region"], g["name"], name)] = {
                "project": p, "region": doc["region"], "group": g["name"], "name": name,
                "description": doc.get("description"), "resizeBy": int(doc.get("resizeBy", 1)),
                "seconds": int(doc.get("seconds", 3600)), "state": doc.get("state", "ACCEPTED"), "step": 0,
                "error": None, "id": new_id(), "created": rfc3339()}
            return {"name": name}

    def region_operation(self, p, rg, name):
        with self.lock:
            op = self.operations.get(name)
            if op is None or op["project"] != p or op["region"] != rg:
                raise GceError(404, "notFound", "The resource 'projects/%s/regions/%s/operations/%s' was not found" % (p, rg, name))
            # One step per call: a wait returns (early) with RUNNING before DONE.
            self.advance_locked(op)
            return 200, self.op_view(op)

    def operation(self, p, z, name):
        with self.lock:
            op = self.operations.get(name)
            if op is None or op["project"] != p or op["region"] is not None or op["zone"] != z:
                raise GceError(404, "notFound", "The resource 'projects/%s/zones/%s/operations/%s' was not found" % (p, z, name))
            # One step per call: a wait returns (early) with RUNNING before DONE.
            self.advance_locked(op)
            return 200, self.op_view(op)

    # ---- future reservations (calendar mode) and commitments -------------------------------

    def clock(self):
        return self.now or datetime.now(timezone.utc)

    def future_view(self, f):
        zl = self.zone_link(f["project"], f["zone"])
        doc = {"kind": "compute#futureReservation", "id": f["id"], "creationTimestamp": f["created"],
               "name": f["name"], "zone": zl, "selfLink": "%s/futureReservations/%s" % (zl, f["name"]),
               "reservationMode": f["body"].get("reservationMode"),
               "planningStatus": f["body"].get("planningStatus"),
               "reservationName": f["body"].get("reservationName"),
               "specificReservationRequired": f["body"].get("specificReservationRequired", False),
               "autoDeleteAutoCreatedReservations": f["body"].get("autoDeleteAutoCreatedReservations", False),
               "timeWindow": f["body"]["timeWindow"],
               "specificSkuProperties": f["body"]["specificSkuProperties"],
               "status": {"procurementStatus": f["procurement"]}}
        if f["lock_time"]:
            doc["status"]["lockTime"] = f["lock_time"]
        if f["body"].get("description") is not None:
            doc["description"] = f["body"]["description"]
        return doc

    def future_locked(self, p, z, name):
        f = self.futures.get((p, z, name))
        if f is None:
            raise GceError(404, "notFound",
                           "The resource 'projects/%s/zones/%s/futureReservations/%s' was not found" % (p, z, name))
        return f

    def future_insert(self, p, z, query, body):
        rid = self.check_request_id(query)
        doc = json.loads(body or b"{}")
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            name = doc.get("name") or ""
            self.check_name(name)
            window = doc.get("timeWindow") or {}
            sku = doc.get("specificSkuProperties") or {}
            count = int(sku.get("totalCount") or 0)
            machine = (sku.get("instanceProperties") or {}).get("machineType")
            if not window.get("startTime") or not window.get("endTime"):
                raise GceError(400, "invalid", "Invalid value for field 'resource.timeWindow'.")
            if count < 1 or not machine:
                raise GceError(400, "invalid", "Invalid value for field 'resource.specificSkuProperties'.")
            if doc.get("reservationMode") == "CALENDAR" and count > 80:
                raise GceError(400, "invalid", "Invalid value for field 'resource.specificSkuProperties.totalCount'.")
            if (p, z, name) in self.futures:
                raise GceError(409, "alreadyExists",
                               "The resource 'projects/%s/zones/%s/futureReservations/%s' already exists" % (p, z, name))
            self.record["future_inserts"][name] = self.record["future_inserts"].get(name, 0) + 1
            status = "DRAFTING" if doc.get("planningStatus") == "DRAFT" else "PENDING_APPROVAL"
            self.futures[(p, z, name)] = {"project": p, "zone": z, "name": name, "body": doc, "id": new_id(),
                                          "created": rfc3339(), "procurement": status, "lock_time": None}
            self.record["futures_created"][name] = self.record["futures_created"].get(name, 0) + 1
            op = self.new_operation_locked(p, z, "insert", name, None, rid, collection="futureReservations")
            return 200, self.op_view(op)

    def future_get(self, p, z, name):
        with self.lock:
            self.advance_zone_locked(p, z)
            return 200, self.future_view(self.future_locked(p, z, name))

    def future_list(self, p, z):
        with self.lock:
            self.advance_zone_locked(p, z)
            items = [self.future_view(f) for (fp, fz, _), f in sorted(self.futures.items()) if (fp, fz) == (p, z)]
            doc = {"kind": "compute#futureReservationsListResponse",
                   "id": "projects/%s/zones/%s/futureReservations" % (p, z),
                   "selfLink": "%s/futureReservations" % self.zone_link(p, z)}
            if items:
                doc["items"] = items
            return 200, doc

    def future_aggregated(self, p):
        with self.lock:
            self.advance_zone_locked(p, None)
            zones = sorted({fz for (fp, fz, _) in self.futures if fp == p} | {"us-central1-a", "us-central1-b"})
            items = {}
            for z in zones:
                found = [self.future_view(f) for (fp, fz, _), f in sorted(self.futures.items()) if (fp, fz) == (p, z)]
                if found:
                    items["zones/" + z] = {"futureReservations": found}
                else:
                    items["zones/" + z] = {"warning": {
                        "code": "NO_RESULTS_ON_PAGE",
                        "message": "There are no results for scope 'zones/%s' on this page." % z,
                        "data": [{"key": "scope", "value": "zones/" + z}]}}
            return 200, {"kind": "compute#futureReservationsAggregatedListResponse",
                         "id": "projects/%s/aggregated/futureReservations" % p, "items": items,
                         "selfLink": "%s/projects/%s/aggregated/futureReservations" % (BASE, p)}

    def future_cancel(self, p, z, name, query):
        rid = self.check_request_id(query)
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            f = self.future_locked(p, z, name)
            now = self.clock()
            start = parse_time(f["body"]["timeWindow"]["startTime"])
            why = None
            if f["procurement"] in FUTURE_LOCKED:
                why = "its procurement status is %s" % f["procurement"]
            elif f["lock_time"] and parse_time(f["lock_time"]) <= now:
                why = "its lock time has passed"
            elif (start - now).total_seconds() < CANCEL_NOTICE_DAYS * 86400:
                why = "its start time is less than %d days away" % CANCEL_NOTICE_DAYS
            if why:
                raise GceError(400, "invalid", "The future reservation '%s' cannot be cancelled: %s." % (name, why))
            self.record["future_cancels"][name] = self.record["future_cancels"].get(name, 0) + 1

            def cancelled():
                f["procurement"] = "CANCELLED"
            op = self.new_operation_locked(p, z, "cancel", name, cancelled, rid, collection="futureReservations")
            return 200, self.op_view(op)

    def future_delete(self, p, z, name, query):
        rid = self.check_request_id(query)
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            f = self.future_locked(p, z, name)
            ended = parse_time(f["body"]["timeWindow"]["endTime"]) <= self.clock()
            if f["procurement"] not in ("CANCELLED", "DECLINED") and not ended:
                raise GceError(400, "invalid", "The future reservation '%s' must be cancelled before it is deleted." % name)

            def gone():
                if self.futures.pop((p, z, name), None) is not None:
                    self.record["future_deleted"][name] = self.record["future_deleted"].get(name, 0) + 1
            op = self.new_operation_locked(p, z, "delete", name, gone, rid, collection="futureReservations")
            return 200, self.op_view(op)

    def future_review(self, doc):
        with self.lock:
            f = self.future_locked(doc.get("project", "gpucap-test"), doc["zone"], doc["name"])
            if "procurementStatus" in doc:
                f["procurement"] = doc["procurementStatus"]
            if "lockTime" in doc:
                f["lock_time"] = doc["lockTime"]

    def commitment_view(self, c):
        rl = self.region_link(c["project"], c["region"])
        doc = {"kind": "compute#commitment", "id": c["id"], "creationTimestamp": c["created"],
               "name": c["name"], "region": rl, "selfLink": "%s/commitments/%s" % (rl, c["name"]),
               "status": c["status"], "plan": c["body"].get("plan"), "type": c["body"].get("type"),
               "category": c["body"].get("category", "MACHINE"), "autoRenew": c["body"].get("autoRenew", False),
               "resources": c["body"].get("resources", [])}
        if c["start"]:
            doc["startTimestamp"], doc["endTimestamp"] = c["start"], c["end"]
        if c["body"].get("existingReservations"):
            doc["existingReservations"] = c["body"]["existingReservations"]
        if c["body"].get("description") is not None:
            doc["description"] = c["body"]["description"]
        return doc

    def commitment_insert(self, p, rg, query, body):
        rid = self.check_request_id(query)
        doc = json.loads(body or b"{}")
        with self.lock:
            op = self.deduped_locked(rid)
            if op:
                return 200, self.op_view(op)
            name = doc.get("name") or ""
            self.check_name(name)
            if doc.get("plan") not in COMMITMENT_PLANS:
                raise GceError(400, "invalid", "Invalid value for field 'resource.plan': '%s'." % doc.get("plan"))
            resources = doc.get("resources") or []
            if not resources or any(int(r.get("amount") or 0) < 1 for r in resources):
                raise GceError(400, "invalid", "Invalid value for field 'resource.resources'.")
            gpus = [r for r in resources if r.get("type") == "ACCELERATOR"]
            if gpus and not doc.get("existingReservations") and not doc.get("reservations"):
                raise GceError(400, "invalid", "Commitments for GPUs must have reservations attached.")
            if (p, rg, name) in self.commitments:
                raise GceError(409, "alreadyExists",
                               "The resource 'projects/%s/regions/%s/commitments/%s' already exists" % (p, rg, name))
            self.record["commitment_inserts"][name] = self.record["commitment_inserts"].get(name, 0) + 1
            c = {"project": p, "region": rg, "name": name, "body": doc, "id": new_id(), "created": rfc3339(),
                 "status": "CREATING", "start": None, "end": None}
            self.commitments[(p, rg, name)] = c
            self.record["commitments_created"][name] = self.record["commitments_created"].get(name, 0) + 1

            def active():
                now = self.clock()
                c["status"] = "ACTIVE"
                c["start"] = rfc3339(now)
                c["end"] = rfc3339(now + timedelta(days=COMMITMENT_PLANS[doc["plan"]]))
            op = self.new_operation_locked(p, None, "insert", name, active, rid, region=rg,
                                           collection="commitments")
            return 200, self.op_view(op)

    def commitment_get(self, p, rg, name):
        with self.lock:
            self.advance_region_locked(p, rg)
            c = self.commitments.get((p, rg, name))
            if c is None:
                raise GceError(404, "notFound",
                               "The resource 'projects/%s/regions/%s/commitments/%s' was not found" % (p, rg, name))
            return 200, self.commitment_view(c)

    def commitment_list(self, p, rg):
        with self.lock:
            self.advance_region_locked(p, rg)
            items = [self.commitment_view(c) for (cp, cr, _), c in sorted(self.commitments.items()) if (cp, cr) == (p, rg)]
            doc = {"kind": "compute#commitmentList", "id": "projects/%s/regions/%s/commitments" % (p, rg),
                   "selfLink": "%s/commitments" % self.region_link(p, rg)}
            if items:
                doc["items"] = items
            return 200, doc

    def machine_types(self, p):
        with open(MACHINE_TYPES) as fh:
            doc = json.load(fh)
        doc.pop("nextPageToken", None)
        return 200, doc


class Handler(BaseHTTPRequestHandler):
    server_version = "gpucap-gce-peer"
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):  # noqa: A002
        pass

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass

    @property
    def peer(self):
        return self.server.peer

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):
        if self.path.startswith("/_peer/record"):
            return self.send_json(200, self.peer.snapshot())
        self.dispatch(b"")

    def do_POST(self):
        body = self.body()
        if self.path.startswith("/_peer/"):
            return self.control(body)
        self.dispatch(body)

    def do_DELETE(self):
        self.dispatch(self.body())

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
            elif self.path.startswith("/_peer/usage"):
                self.peer.set_usage(doc)
            elif self.path.startswith("/_peer/resize_request"):
                self.peer.rr_review(doc)
            elif self.path.startswith("/_peer/future"):
                self.peer.future_review(doc)
            elif self.path.startswith("/_peer/seed"):
                return self.send_json(200, self.peer.seed(doc))
            else:
                return self.send_json(404, {"error": "no such control endpoint %s" % self.path})
        except (ValueError, KeyError, TypeError) as e:
            return self.send_json(400, {"error": str(e)})
        self.send_json(200, {"ok": True})

    def route(self):
        split = urllib.parse.urlsplit(self.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(split.query).items()}
        for method, regex, op in ROUTES:
            m = regex.match(split.path)
            if m and method == self.command:
                return op, m.groupdict(), query
        return "BAD", {}, query

    def dispatch(self, body):
        op, g, query = self.route()
        with self.peer.lock:
            rec = self.peer.record
            rec["requests"] += 1
            call = rec["calls"].get(op, 0) + 1
            rec["calls"][op] = call
            rec["log"].append({"method": self.command, "path": urllib.parse.urlsplit(self.path).path, "op": op,
                               "requestId": query.get("requestId")})
        latency, fault = self.peer.transport_faults(op, call)
        if latency:
            time.sleep(latency)
        kind = fault["fault"] if fault else None
        if kind == "reset":
            return self.reset()
        if kind == "throttle":
            if int(fault.get("status", 403)) == 429:
                e = GceError(429, "rateLimitExceeded", "Quota exceeded for quota metric 'Queries' and limit "
                             "'Queries per minute' of service 'compute.googleapis.com'.", "usageLimits",
                             {"status": "RESOURCE_EXHAUSTED"})
            else:
                e = GceError(403, "rateLimitExceeded", "Rate Limit Exceeded", "usageLimits")
            return self.send_json(e.status, e.envelope())
        if kind == "status":
            status = int(fault.get("status", 503))
            e = GceError(status, fault.get("reason", "backendError"),
                         fault.get("message", "Internal error. Please try again or contact Google Support."))
            return self.send_json(status, e.envelope())
        try:
            status, doc = self.handle_op(op, g, query, body)
        except GceError as e:
            status, doc = e.status, e.envelope()
        except (ValueError, TypeError) as e:
            status, doc = 400, GceError(400, "parseError", "Parse Error: %s" % e).envelope()
        if kind == "drop_response":
            return self.reset()
        self.send_json(status, doc)

    def handle_op(self, op, g, query, body):
        if op == "BAD":
            raise GceError(404, "notFound", "no route for %s %s" % (self.command, self.path))
        if not self.headers.get("Authorization") and os.environ.get("GCE_PEER_REQUIRE_AUTH"):
            raise GceError(401, "required", "Login Required.")
        p = g.get("p")
        if op == "insert":
            return self.peer.insert(p, g["z"], query, body)
        if op == "get":
            return self.peer.get(p, g["z"], g["r"])
        if op == "list":
            return self.peer.list(p, g["z"])
        if op == "aggregatedList":
            return self.peer.aggregated(p)
        if op == "resize":
            return self.peer.resize(p, g["z"], g["r"], query, body)
        if op == "delete":
            return self.peer.delete(p, g["z"], g["r"], query)
        if op == "templates.insert":
            return self.peer.template_insert(p, g["rg"], query, body)
        if op == "templates.get":
            return self.peer.template_get(p, g["rg"], g["t"])
        if op == "groups.insert":
            return self.peer.group_insert(p, g["rg"], query, body)
        if op == "groups.get":
            return self.peer.group_get(p, g["rg"], g["g"])
        if op == "groups.list":
            return self.peer.group_list(p, g["rg"])
        if op == "groups.resize":
            return self.peer.group_resize(p, g["rg"], g["g"], query)
        if op == "groups.listManagedInstances":
            return self.peer.group_instances(p, g["rg"], g["g"])
        if op == "resizeRequests.insert":
            return self.peer.rr_insert(p, g["rg"], g["g"], query, body)
        if op == "resizeRequests.get":
            return self.peer.rr_get(p, g["rg"], g["g"], g["rr"])
        if op == "resizeRequests.list":
            return self.peer.rr_list(p, g["rg"], g["g"])
        if op == "resizeRequests.cancel":
            return self.peer.rr_cancel(p, g["rg"], g["g"], g["rr"], query)
        if op == "resizeRequests.delete":
            return self.peer.rr_delete(p, g["rg"], g["g"], g["rr"], query)
        if op == "future.insert":
            return self.peer.future_insert(p, g["z"], query, body)
        if op == "future.get":
            return self.peer.future_get(p, g["z"], g["f"])
        if op == "future.list":
            return self.peer.future_list(p, g["z"])
        if op == "future.aggregatedList":
            return self.peer.future_aggregated(p)
        if op == "future.cancel":
            return self.peer.future_cancel(p, g["z"], g["f"], query)
        if op == "future.delete":
            return self.peer.future_delete(p, g["z"], g["f"], query)
        if op == "commitments.insert":
            return self.peer.commitment_insert(p, g["rg"], query, body)
        if op == "commitments.get":
            return self.peer.commitment_get(p, g["rg"], g["c"])
        if op == "commitments.list":
            return self.peer.commitment_list(p, g["rg"])
        if op == "machineTypes.aggregatedList":
            return self.peer.machine_types(p)
        if op == "regions.get":
            return self.peer.region(p, g["rg"])
        if op in ("regionOperations.get", "regionOperations.wait"):
            return self.peer.region_operation(p, g["rg"], g["op"])
        return self.peer.operation(p, g["z"], g["op"])

    def send_json(self, status, doc):
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def reset(self):
        """Closes the connection with a TCP RST and writes nothing."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass


def watch_parent(parent):
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.2)


def watch_stdin():
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description="gpucap's local Compute Engine reservations peer")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    args = ap.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    server.peer = Peer()

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
