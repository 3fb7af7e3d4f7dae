#!/usr/bin/env python3
"""A local Azure Resource Manager peer for gpucap's tests: an HTTP server that answers the
Microsoft.Compute capacity reservation and virtual machine scale set APIs (api-version
2024-07-01) in the documented JSON, runs their long-running operations (Azure-AsyncOperation /
Location polling), keeps its own record of everything created, and injects faults on request.

Why it exists: there is no Azure emulator for capacity reservations or scale sets, and
gpucap's apply must be tested against throttling, allocation failures, stockouts and a
response lost after ARM acted. The formats replayed are summarised, with their sources, in
docs/azure-capacity-api.md.

Served (SUB = /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute):
  PUT    SUB/capacityReservationGroups/{g}                  200/201, synchronous
  GET    SUB/capacityReservationGroups/{g}                  200 / 404 ResourceNotFound
  GET    SUB/capacityReservationGroups                      {"value": [...]}
  PUT    SUB/capacityReservationGroups/{g}/capacityReservations/{r}
                                                           201 (new) / 200 (existing), body
                                                           with provisioningState Creating or
                                                           Updating, Azure-AsyncOperation and
                                                           Location headers; 409 Conflict while
                                                           another operation runs on it
  GET    …/capacityReservations/{r}[?$expand=instanceView]  the reservation
  GET    …/capacityReservations                              {"value": [...], "nextLink"?}
  PATCH  …/capacityReservations/{r}                          {"sku": {"capacity": N}}: 200 +
                                                           Azure-AsyncOperation (LRO)
  DELETE …/capacityReservations/{r}                          202 + Location (LRO); 409
                                                           OperationNotAllowed while a VM is
                                                           associated; 204 when absent
  PUT    SUB/virtualMachineScaleSets/{n}                    flexible orchestration only: 201 (new)
                                                           / 200 (existing), provisioningState
                                                           Creating or Updating, LRO headers;
                                                           409 Conflict while an operation runs;
                                                           400 for a body ARM would refuse (no
                                                           platformFaultDomainCount, image,
                                                           subnet, SSH key, Spot without
                                                           evictionPolicy, Spot with a capacity
                                                           reservation group, …)
  GET    SUB/virtualMachineScaleSets/{n}                    the scale set / 404 ResourceNotFound
  GET    SUB/virtualMachineScaleSets                        {"value": [...]}
  PATCH  SUB/virtualMachineScaleSets/{n}                    {"sku": {"capacity": N}}, "tags": 200
                                                           + LRO. When the operation ends, the
                                                           scale set's VMs are made or deleted
                                                           to match `sku.capacity` (Failed VMs
                                                           are replaced first)
  GET    SUB/virtualMachines?$filter='virtualMachineScaleSet/id' eq '{id}'[&$expand=instanceView]
         the VMs of a flexible scale set ({"value", "nextLink"?}, `page_size` a page); a new
         VM is Creating for its first `vm_polls` lists (default 1), then Succeeded and
         PowerState/running
  GET    /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/operations/{id}
         {"name", "startTime", "status": "InProgress"|"Succeeded"|"Failed", "endTime"?,
          "error"?: {"code", "message"}}
  GET    /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/operationResults/{id}
         202 while running, then 200 (PUT/PATCH: the resource) or 204 (DELETE); a failed
         operation answers with its error envelope
  GET    /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/usages
         Compute's vCPU quotas in the location ({"value": [{"unit": "Count", "currentValue",
         "limit", "name": {"value", "localizedValue"}}], "nextLink"?}, `page_size` a page),
         as set by `usages`; a location not set answers 404 ResourceNotFound
         (https://learn.microsoft.com/en-us/rest/api/compute/usage/list, read 2026-11-25)
  POST   /{tenant}/oauth2/v2.0/token   Entra ID client-credentials / federated token grant
         (form: grant_type, client_id, client_secret | client_assertion, scope)

Every ARM call needs `api-version` (400 MissingApiVersionParameter otherwise) and an
`Authorization: Bearer …` header (401 AuthenticationFailed otherwise). Errors use the ARM
envelope {"error": {"code", "message"}}. An operation takes `lro_polls` polls (default 2)
to finish (a GET or list of its reservation counts as one: operations run whether polled or
not); every answer carries `Retry-After: <retry_after>` (default 0 s).

Control API (JSON, not part of ARM):
  GET  /_peer/record   {"requests": n, "calls": {OP: n}, "log": [{"method", "path", "op"}],
                       "faults": [{"op", "call", "fault"}], "fault_counts": {fault: n},
                       "created": {name: n}  (how often a reservation of that name came
                       into existence), "puts": {name: n}, "deleted": {name: n},
                       "tokens": n (token grants), "reservations": [...] (as GET shows them),
                       "scale_sets": [...] (as GET shows them), "vms": [...] (with instance
                       view), "scale_set_created": {name: n}, "scale_set_puts": {name: n},
                       "scale_set_patches": {name: n}, "vms_created": n}
  POST /_peer/config   {"lro_polls": 2, "retry_after": 0, "resource_groups": null | [names],
                        "vm_polls": 1, "page_size": 50,
                        "usages": {LOCATION: {QUOTA NAME: LIMIT}}}
                       (with a list, ARM calls in any other resource group answer 404
                       ResourceGroupNotFound)
  POST /_peer/faults   {"seed": 7, "rules": [RULE, ...]} replaces the rules
  POST /_peer/reset    forgets every resource, the record and the faults
  POST /_peer/usage    {"<reservation name>": N}: N VMs are associated with (and allocated
                       in) it from now on
  POST /_peer/seed     {"group", "name", "location", "sku", "capacity", "zones", "tags"}
                       creates a Succeeded reservation (and its group) as another client
                       would, without gpucap's tags unless given
  POST /_peer/seed_scale_set {"name", "location", "sku", "capacity", "tags"} creates a
                       Succeeded flexible scale set with that many running VMs, as another
                       client would

A RULE is {"fault": KIND, ...}. OP names are `PUT group`, `GET group`, `LIST groups`,
`PUT reservation`, `GET reservation`, `LIST reservations`, `PATCH reservation`,
`DELETE reservation`, `PUT scaleset`, `GET scaleset`, `LIST scalesets`, `PATCH scaleset`,
`LIST vms`, `LIST usages`, `GET operation`, `GET operationResult`, `token`. Transport faults match
on "op" (a name, a list, or "*"/absent for any), optional "calls" (1-based indices of that
op's calls), "probability" (0..1, seeded) and "times":
  "throttle"       429 TooManyRequests with `Retry-After: <"retry_after", default 1>`
  "status"         "status": 500|503|…, optional "code"
  "reset"          TCP reset before acting: nothing happened
  "latency"        sleeps "seconds" first (combines with the others)
  "drop_response"  carries the call out, then resets the connection without an answer
State faults:
  "allocation"     {"sku"?, "zone"?, "code"?: AllocationFailed|ZonalAllocationFailed|
                   SkuNotAvailable}: a reservation PUT/PATCH that matches is accepted and its
                   operation ends Failed with that error; the reservation is left Failed
  "quota"          {"sku"?}: a matching PUT answers 409 OperationNotAllowed (cores quota)
  "stockout"       {"sku"?, "priority"?: Regular|Spot, "available": N, "code"?:
                   AllocationFailed|ZonalAllocationFailed|SkuNotAvailable}: at most N VMs of
                   that size (and priority) run in the peer; a scale set operation that would
                   make more leaves the rest Failed (their instance view says why) and ends
                   Failed with that error

Usage: azure_arm_peer.py [--port 0] [--exit-on-stdin-eof]. Binds 127.0.0.1, prints the
port as the first line of stdout. Python 3 standard library only.
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
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_VERSION = "2024-07-01"
TRANSPORT_FAULTS = {"throttle", "status", "reset", "latency", "drop_response"}
STATE_FAULTS = {"allocation", "quota", "stockout"}

SUB_RE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"capacityReservationGroups(?:/(?P<group>[^/]+)(?:/capacityReservations(?:/(?P<name>[^/]+))?)?)?$",
    re.IGNORECASE,
)
OP_RE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/locations/(?P<loc>[^/]+)/"
    r"(?P<kind>operations|operationResults)/(?P<id>[^/]+)$",
    re.IGNORECASE,
)
VMSS_RE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"virtualMachineScaleSets(?:/(?P<name>[^/]+))?$",
    re.IGNORECASE,
)
VMS_RE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"virtualMachines$",
    re.IGNORECASE,
)
SCALE_SET_OPS = {"PUT scaleset", "GET scaleset", "LIST scalesets", "PATCH scaleset", "LIST vms"}
USAGES_RE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/locations/(?P<loc>[^/]+)/usages$",
    re.IGNORECASE,
)
TOKEN_RE = re.compile(r"^/(?P<tenant>[^/]+)/oauth2/v2\.0/token$")


def iso(t=None):
    t = t or datetime.now(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "0+00:00"


class ArmError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Peer:
    def __init__(self):
        self.lock = threading.Lock()
        self.lro_polls = 2
        self.retry_after = 0
        self.resource_groups = None  # None: every resource group exists
        self.vm_polls = 1
        self.page_size = 50
        self.usages = {}  # location -> quota name -> limit
        self.reset_locked()

    def reset_locked(self):
        self.groups = {}  # (rg, group) -> dict
        self.reservations = {}  # (rg, group, name) -> dict
        self.operations = {}  # id -> dict
        self.scale_sets = {}  # (rg, name) -> dict
        self.vms = {}  # (rg, vm name) -> dict
        self.vm_seq = 0
        self.rules = []
        self.fired = []
        self.rng = random.Random(0)
        self.record = {
            "requests": 0,
            "calls": {},
            "log": [],
            "faults": [],
            "fault_counts": {},
            "created": {},
            "puts": {},
            "deleted": {},
            "tokens": 0,
            "scale_set_created": {},
            "scale_set_puts": {},
            "scale_set_patches": {},
            "vms_created": 0,
        }

    # ---- control -------------------------------------------------------------------------

    def configure(self, cfg):
        with self.lock:
            self.lro_polls = int(cfg.get("lro_polls", self.lro_polls))
            self.retry_after = int(cfg.get("retry_after", self.retry_after))
            self.vm_polls = int(cfg.get("vm_polls", self.vm_polls))
            self.page_size = max(1, int(cfg.get("page_size", self.page_size)))
            if "usages" in cfg:
                self.usages = {
                    loc.lower(): {n: int(v) for n, v in q.items()} for loc, q in cfg["usages"].items()
                }
            if "resource_groups" in cfg:
                rgs = cfg["resource_groups"]
                self.resource_groups = None if rgs is None else [g.lower() for g in rgs]

    def set_faults(self, cfg):
        with self.lock:
            rules = cfg.get("rules", [])
            for r in rules:
                if r.get("fault") not in TRANSPORT_FAULTS | STATE_FAULTS:
                    raise ValueError("unknown fault %r" % r.get("fault"))
            self.rules = rules
            self.fired = [0] * len(rules)
            self.rng = random.Random(cfg.get("seed", 0))

    def snapshot(self):
        with self.lock:
            doc = json.loads(json.dumps(self.record))
            doc["reservations"] = [self.view(r, True) for r in self.reservations.values()]
            doc["groups"] = [self.group_view(g) for g in self.groups.values()]
            doc["scale_sets"] = [self.scale_set_view(v) for _, v in sorted(self.scale_sets.items())]
            doc["vms"] = [self.vm_view(v, True) for _, v in sorted(self.vms.items())]
            return doc

    def set_usage(self, doc):
        with self.lock:
            for name, n in doc.items():
                found = [r for r in self.reservations.values() if r["name"] == name]
                if not found:
                    raise KeyError("no reservation named %s" % name)
                for r in found:
                    r["vms"] = [
                        "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/vm-%s-%d"
                        % (r["sub"], r["rg"], name, i + 1)
                        for i in range(int(n))
                    ]

    def seed(self, doc):
        with self.lock:
            sub, rg = doc.get("subscription", "sub"), doc.get("resource_group", "rg")
            g = self.ensure_group_locked(sub, rg, doc["group"], doc["location"], doc.get("zones"), {})
            r = self.new_reservation_locked(
                sub, rg, doc["group"], doc["name"], doc["location"], doc["sku"],
                int(doc.get("capacity", 1)), doc.get("zones"), doc.get("tags", {}),
            )
            r["state"] = "Succeeded"
            return {"id": r["id"], "group": g["id"]}

    def seed_scale_set(self, doc):
        with self.lock:
            sub, rg = doc.get("subscription", "sub"), doc.get("resource_group", "rg")
            profile = {"priority": doc.get("priority", "Regular")}
            s = self.new_scale_set_locked(sub, rg, doc["name"], doc["location"], doc["sku"],
                                          int(doc.get("capacity", 0)), doc.get("zones"),
                                          doc.get("tags", {}), profile)
            # Not gpucap's doing: kept out of the record of what was created.
            del self.record["scale_set_created"][s["name"]]
            made = self.record["vms_created"]
            self.reconcile_vms_locked(s)
            self.record["vms_created"] = made
            for vm in self.vms_of_locked(s):
                vm["polls_left"] = 0
                vm["state"] = "Succeeded" if vm["state"] == "Creating" else vm["state"]
            s["state"] = "Succeeded"
            return {"id": s["id"]}

    # ---- faults --------------------------------------------------------------------------

    def count_fault_locked(self, op, call, kind):
        self.record["faults"].append({"op": op, "call": call, "fault": kind})
        self.record["fault_counts"][kind] = self.record["fault_counts"].get(kind, 0) + 1

    def matches(self, rule, op, call):
        want = rule.get("op", "*")
        if want != "*" and op not in (want if isinstance(want, list) else [want]):
            return False
        if "calls" in rule and call not in rule["calls"]:
            return False
        return True

    def transport_faults(self, op, call):
        """(latency seconds, the first other transport fault that fires)."""
        latency, fault = 0.0, None
        with self.lock:
            for i, rule in enumerate(self.rules):
                kind = rule["fault"]
                if kind not in TRANSPORT_FAULTS or not self.matches(rule, op, call):
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

    def state_fault_locked(self, kind, sku, zones):
        for i, rule in enumerate(self.rules):
            if rule["fault"] != kind:
                continue
            if "sku" in rule and rule["sku"].lower() != (sku or "").lower():
                continue
            if "zone" in rule and str(rule["zone"]) not in (zones or []):
                continue
            if "times" in rule and self.fired[i] >= int(rule["times"]):
                continue
            self.fired[i] += 1
            self.count_fault_locked("state", 0, kind)
            return rule
        return None

    # ---- resources -----------------------------------------------------------------------

    def group_id(self, sub, rg, group):
        return "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/capacityReservationGroups/%s" % (
            sub, rg, group)

    def ensure_group_locked(self, sub, rg, group, location, zones, tags):
        key = (rg.lower(), group.lower())
        g = self.groups.get(key)
        if g is None:
            g = {"sub": sub, "rg": rg, "name": group, "location": location, "zones": zones or None,
                 "tags": tags or {}, "id": self.group_id(sub, rg, group)}
            self.groups[key] = g
        return g

    def group_view(self, g):
        members = [r["id"] for r in self.reservations.values()
                   if (r["rg"].lower(), r["group"].lower()) == (g["rg"].lower(), g["name"].lower())]
        vms = [vm for r in self.reservations.values()
               if (r["rg"].lower(), r["group"].lower()) == (g["rg"].lower(), g["name"].lower())
               for vm in r["vms"]]
        doc = {
            "name": g["name"],
            "id": g["id"],
            "type": "Microsoft.Compute/capacityReservationGroups",
            "location": g["location"],
            "tags": g["tags"],
            "properties": {
                "capacityReservations": [{"id": m} for m in members],
                "virtualMachinesAssociated": [{"id": v} for v in vms],
            },
        }
        if g["zones"]:
            doc["zones"] = g["zones"]
        return doc

    def new_reservation_locked(self, sub, rg, group, name, location, sku, capacity, zones, tags):
        r = {
            "sub": sub, "rg": rg, "group": group, "name": name, "location": location,
            "sku": sku, "capacity": capacity, "zones": zones or None, "tags": tags or {},
            "state": "Creating", "vms": [], "reservation_id": str(uuid.uuid4()),
            "created": iso(),
            "id": self.group_id(sub, rg, group) + "/capacityReservations/" + name,
        }
        self.reservations[(rg.lower(), group.lower(), name.lower())] = r
        self.record["created"][name] = self.record["created"].get(name, 0) + 1
        return r

    def view(self, r, instance_view):
        props = {
            "platformFaultDomainCount": 3,
            "reservationId": r["reservation_id"],
            "provisioningState": r["state"],
            "provisioningTime": r["created"],
            "timeCreated": r["created"],
            "virtualMachinesAssociated": [{"id": v} for v in r["vms"]],
        }
        if instance_view:
            props["instanceView"] = {
                "utilizationInfo": {
                    "currentCapacity": r["capacity"] if r["state"] == "Succeeded" else 0,
                    "virtualMachinesAllocated": [{"id": v} for v in r["vms"]],
                },
                "statuses": [{
                    "code": "ProvisioningState/%s" % r["state"].lower(),
                    "level": "Info" if r["state"] != "Failed" else "Error",
                    "displayStatus": "Provisioning %s" % r["state"].lower(),
                }],
            }
        doc = {
            "name": r["name"],
            "id": r["id"],
            "type": "Microsoft.Compute/capacityReservationGroups/capacityReservations",
            "location": r["location"],
            "tags": r["tags"],
            "sku": {"name": r["sku"], "capacity": r["capacity"]},
            "properties": props,
        }
        if r["zones"]:
            doc["zones"] = r["zones"]
        return doc

    def new_operation_locked(self, sub, location, kind, target, outcome):
        op_id = str(uuid.uuid4())
        self.operations[op_id] = {
            "id": op_id, "sub": sub, "location": location, "kind": kind, "target": target,
            "outcome": outcome, "polls": 0, "start": iso(), "status": "InProgress",
        }
        return op_id

    def observe_locked(self, rkey):
        """A read of a reservation moves its running operation on too: in ARM operations run
        by themselves, polled or not (an answer lost with its Azure-AsyncOperation URL)."""
        for op in list(self.operations.values()):
            if op["target"] == rkey and op["status"] == "InProgress":
                self.advance_locked(op)

    def advance_locked(self, op):
        """One poll: the operation finishes after `lro_polls` polls."""
        if op["status"] != "InProgress":
            return
        op["polls"] += 1
        if op["polls"] < self.lro_polls:
            return
        op["end"] = iso()
        if op["kind"] == "vmss":
            s = self.scale_sets.get(op["target"][1:])
            error = self.reconcile_vms_locked(s) if s is not None else None
            if error is None:
                op["status"] = "Succeeded"
                if s is not None:
                    s["state"] = "Succeeded"
            else:
                op["status"] = "Failed"
                op["error"] = error
                s["state"] = "Failed"
            return
        outcome = op["outcome"]
        r = self.reservations.get(op["target"])
        if outcome is None:
            op["status"] = "Succeeded"
            if op["kind"] == "delete":
                if r is not None:
                    del self.reservations[op["target"]]
                    name = r["name"]
                    self.record["deleted"][name] = self.record["deleted"].get(name, 0) + 1
            elif r is not None:
                r["state"] = "Succeeded"
        else:
            op["status"] = "Failed"
            op["error"] = outcome
            if r is not None:
                r["state"] = "Failed"


    # ---- scale sets ----------------------------------------------------------------------

    def scale_set_id(self, sub, rg, name):
        return "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s" % (
            sub, rg, name)

    def new_scale_set_locked(self, sub, rg, name, location, sku, capacity, zones, tags, profile):
        s = {
            "sub": sub, "rg": rg, "name": name, "location": location, "sku": sku,
            "capacity": capacity, "zones": zones or None, "tags": tags or {}, "profile": profile,
            "state": "Creating", "unique_id": str(uuid.uuid4()), "created": iso(),
            "id": self.scale_set_id(sub, rg, name),
        }
        self.scale_sets[(rg.lower(), name.lower())] = s
        self.record["scale_set_created"][name] = self.record["scale_set_created"].get(name, 0) + 1
        return s

    def scale_set_view(self, s):
        profile = json.loads(json.dumps(s["profile"]))
        profile.get("osProfile", {}).pop("adminPassword", None)  # never returned
        doc = {
            "name": s["name"],
            "id": s["id"],
            "type": "Microsoft.Compute/virtualMachineScaleSets",
            "location": s["location"],
            "tags": s["tags"],
            "sku": {"name": s["sku"], "tier": "Standard", "capacity": s["capacity"]},
            "properties": {
                "orchestrationMode": "Flexible",
                "platformFaultDomainCount": 1,
                "singlePlacementGroup": False,
                "provisioningState": s["state"],
                "uniqueId": s["unique_id"],
                "timeCreated": s["created"],
                "virtualMachineProfile": profile,
            },
        }
        if s["zones"]:
            doc["zones"] = s["zones"]
        return doc

    def vms_of_locked(self, s):
        key = (s["rg"].lower(), s["name"].lower())
        return sorted((v for v in self.vms.values() if v["vmss"] == key), key=lambda v: v["seq"])

    def stockout_locked(self, s):
        """The stockout rule that stops one more VM of this scale set, or None."""
        priority = s["profile"].get("priority") or "Regular"
        for rule in self.rules:
            if rule["fault"] != "stockout":
                continue
            if "sku" in rule and rule["sku"].lower() != s["sku"].lower():
                continue
            if "priority" in rule and rule["priority"] != priority:
                continue
            same = [v for v in self.vms.values() if v["state"] != "Failed"
                    and v["sku"].lower() == s["sku"].lower()
                    and ("priority" not in rule or v["priority"] == rule["priority"])]
            if len(same) >= int(rule.get("available", 0)):
                return rule
        return None

    def reconcile_vms_locked(self, s):
        """Makes or deletes VMs to match the scale set's capacity; the error of the first VM
        that could not be made, or None."""
        for vm in [v for v in self.vms_of_locked(s) if v["state"] == "Failed"]:
            del self.vms[(vm["rg"].lower(), vm["name"].lower())]
        live = self.vms_of_locked(s)
        while len(live) > s["capacity"]:
            vm = live.pop()
            del self.vms[(vm["rg"].lower(), vm["name"].lower())]
        error = None
        while len(live) < s["capacity"]:
            self.vm_seq += 1
            name = "%s_%08x" % (s["name"], self.vm_seq)
            rule = self.stockout_locked(s)
            vm = {
                "sub": s["sub"], "rg": s["rg"], "name": name, "vmss": (s["rg"].lower(), s["name"].lower()),
                "vmss_id": s["id"], "location": s["location"], "zones": s["zones"], "sku": s["sku"],
                "priority": s["profile"].get("priority") or "Regular", "seq": self.vm_seq,
                "state": "Creating", "polls_left": self.vm_polls, "error": None, "vm_id": str(uuid.uuid4()),
                "id": "/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s" % (
                    s["sub"], s["rg"], name),
            }
            if rule is not None:
                code = rule.get("code", "ZonalAllocationFailed" if s["zones"] else "AllocationFailed")
                vm["state"] = "Failed"
                vm["error"] = {
                    "code": code,
                    "message": "Allocation failed. We do not have sufficient capacity for the requested VM size %s in this %s. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance" % (s["sku"], "zone" if s["zones"] else "region"),
                }
                self.count_fault_locked("state", 0, "stockout")
                error = error or vm["error"]
            else:
                self.record["vms_created"] += 1
            self.vms[(s["rg"].lower(), name.lower())] = vm
            live.append(vm)
        return error

    def vm_view(self, vm, instance_view):
        props = {
            "provisioningState": vm["state"],
            "vmId": vm["vm_id"],
            "priority": vm["priority"],
            "hardwareProfile": {"vmSize": vm["sku"]},
            "virtualMachineScaleSet": {"id": vm["vmss_id"]},
        }
        if instance_view:
            if vm["state"] == "Failed":
                statuses = [{
                    "code": "ProvisioningState/failed/%s" % vm["error"]["code"],
                    "level": "Error",
                    "displayStatus": "Provisioning failed",
                    "message": vm["error"]["message"],
                }]
            elif vm["state"] == "Creating":
                statuses = [{"code": "ProvisioningState/creating", "level": "Info",
                             "displayStatus": "Creating"}]
            else:
                statuses = [
                    {"code": "ProvisioningState/succeeded", "level": "Info",
                     "displayStatus": "Provisioning succeeded"},
                    {"code": "PowerState/running", "level": "Info", "displayStatus": "VM running"},
                ]
            props["instanceView"] = {"computerName": vm["name"], "statuses": statuses}
        doc = {
            "name": vm["name"],
            "id": vm["id"],
            "type": "Microsoft.Compute/virtualMachines",
            "location": vm["location"],
            "properties": props,
        }
        if vm["zones"]:
            doc["zones"] = vm["zones"]
        return doc


class Handler(BaseHTTPRequestHandler):
    server_version = "gpucap-azure-arm-peer"
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

    def do_PUT(self):
        self.dispatch(self.body())

    def do_PATCH(self):
        self.dispatch(self.body())

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
            elif self.path.startswith("/_peer/seed_scale_set"):
                return self.send_json(200, self.peer.seed_scale_set(doc))
            elif self.path.startswith("/_peer/seed"):
                return self.send_json(200, self.peer.seed(doc))
            else:
                return self.send_json(404, {"error": "no such control endpoint %s" % self.path})
        except (ValueError, KeyError, TypeError) as e:
            return self.send_json(400, {"error": str(e)})
        self.send_json(200, {"ok": True})

    # ---- routing -------------------------------------------------------------------------

    def route(self):
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        query = {k: v[0] for k, v in urllib.parse.parse_qs(split.query).items()}
        m = TOKEN_RE.match(path)
        if m and self.command == "POST":
            return "token", m, query
        m = OP_RE.match(path)
        if m and self.command == "GET":
            kind = "GET operation" if m.group("kind").lower() == "operations" else "GET operationResult"
            return kind, m, query
        m = USAGES_RE.match(path)
        if m:
            return ("LIST usages" if self.command == "GET" else "BAD"), m, query
        m = VMSS_RE.match(path)
        if m:
            if m.group("name"):
                return ("%s scaleset" % self.command if self.command in ("GET", "PUT", "PATCH") else "BAD"), m, query
            return ("LIST scalesets" if self.command == "GET" else "BAD"), m, query
        m = VMS_RE.match(path)
        if m:
            return ("LIST vms" if self.command == "GET" else "BAD"), m, query
        m = SUB_RE.match(path)
        if m:
            if m.group("name"):
                return "%s reservation" % self.command, m, query
            if m.group("group") and path.lower().endswith("/capacityreservations"):
                return ("LIST reservations" if self.command == "GET" else "BAD"), m, query
            if m.group("group"):
                return "%s group" % self.command, m, query
            return ("LIST groups" if self.command == "GET" else "BAD"), m, query
        return "BAD", None, query

    def dispatch(self, body):
        op, m, query = self.route()
        with self.peer.lock:
            rec = self.peer.record
            rec["requests"] += 1
            call = rec["calls"].get(op, 0) + 1
            rec["calls"][op] = call
            rec["log"].append({"method": self.command, "path": urllib.parse.urlsplit(self.path).path, "op": op})
        latency, fault = self.peer.transport_faults(op, call)
        if latency:
            time.sleep(latency)
        kind = fault["fault"] if fault else None
        if kind == "reset":
            return self.reset()
        if kind == "throttle":
            return self.send_json(
                429,
                {"error": {"code": "TooManyRequests", "message": "The request is being throttled."}},
                {"Retry-After": str(fault.get("retry_after", 1))},
            )
        if kind == "status":
            status = int(fault.get("status", 503))
            code = fault.get("code") or ("ServiceUnavailable" if status == 503 else "InternalServerError")
            return self.send_json(status, {"error": {"code": code, "message": "The server had an error."}})
        try:
            status, doc, headers = self.handle_op(op, m, query, body)
        except ArmError as e:
            status, doc, headers = e.status, {"error": {"code": e.code, "message": e.message}}, {}
        if kind == "drop_response":
            return self.reset()
        self.send_json(status, doc, headers)

    def handle_op(self, op, m, query, body):
        if op == "token":
            return self.token(body)
        if op == "BAD" or m is None:
            raise ArmError(404, "InvalidResourceType", "no route for %s %s" % (self.command, self.path))
        if query.get("api-version") is None:
            raise ArmError(400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
        auth = self.headers.get("Authorization") or ""
        if not auth.startswith("Bearer ") or len(auth) <= len("Bearer "):
            raise ArmError(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            raise ArmError(400, "InvalidRequestContent", "The request content was invalid and could not be deserialized.")
        p = self.peer
        with p.lock:
            if op in ("GET operation", "GET operationResult"):
                return self.operation(op, m)
            if op == "LIST usages":
                return self.usages(m, query)
            sub, rg = m.group("sub"), m.group("rg")
            if p.resource_groups is not None and rg.lower() not in p.resource_groups:
                raise ArmError(404, "ResourceGroupNotFound", "Resource group '%s' could not be found." % rg)
            if op in SCALE_SET_OPS:
                return self.scale_set_op(op, m, query, doc)
            group = m.group("group")
            if op == "LIST groups":
                items = [p.group_view(g) for (grg, _), g in sorted(p.groups.items()) if grg == rg.lower()]
                return 200, {"value": items}, {}
            gkey = (rg.lower(), (group or "").lower())
            if op == "PUT group":
                if "location" not in doc:
                    raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
                existing = p.groups.get(gkey)
                if existing is not None:
                    if existing["location"] != doc["location"]:
                        raise ArmError(409, "InvalidResourceLocation", "The resource already exists in location %s." % existing["location"])
                    existing["tags"] = doc.get("tags", existing["tags"])
                    return 200, p.group_view(existing), {}
                g = p.ensure_group_locked(sub, rg, group, doc["location"], doc.get("zones"), doc.get("tags"))
                return 201, p.group_view(g), {}
            if op == "GET group":
                g = p.groups.get(gkey)
                if g is None:
                    raise ArmError(404, "ResourceNotFound", "The Resource 'Microsoft.Compute/capacityReservationGroups/%s' under resource group '%s' was not found." % (group, rg))
                return 200, p.group_view(g), {}
            g = p.groups.get(gkey)
            if op == "LIST reservations":
                if g is None:
                    raise ArmError(404, "ResourceNotFound", "The Resource 'Microsoft.Compute/capacityReservationGroups/%s' under resource group '%s' was not found." % (group, rg))
                for k in [k for k in p.reservations if k[:2] == gkey]:
                    p.observe_locked(k)
                items = [p.view(r, False) for k, r in sorted(p.reservations.items()) if k[:2] == gkey]
                return 200, {"value": items}, {}
            name = m.group("name")
            rkey = (rg.lower(), (group or "").lower(), name.lower())
            if op == "GET reservation":
                p.observe_locked(rkey)
            r = p.reservations.get(rkey)
            not_found = ArmError(404, "ResourceNotFound", "The Resource 'Microsoft.Compute/capacityReservationGroups/%s/capacityReservations/%s' under resource group '%s' was not found." % (group, name, rg))
            if op == "GET reservation":
                if r is None:
                    raise not_found
                return 200, p.view(r, query.get("$expand") == "instanceView"), {}
            if op == "PUT reservation":
                return self.put_reservation(sub, rg, group, name, g, r, doc)
            if op == "PATCH reservation":
                if r is None:
                    raise not_found
                if r["state"] in ("Creating", "Updating", "Deleting"):
                    raise ArmError(409, "Conflict", "Operation on the resource is not allowed: another operation is in progress.")
                sku = doc.get("sku") or {}
                if "capacity" in sku:
                    r["capacity"] = int(sku["capacity"])
                if "tags" in doc:
                    r["tags"] = doc["tags"]
                r["state"] = "Updating"
                outcome = self.allocation_outcome(r["sku"], r["zones"])
                op_id = p.new_operation_locked(sub, r["location"], "patch", rkey, outcome)
                return 200, p.view(r, False), self.lro_headers(sub, r["location"], op_id)
            if op == "DELETE reservation":
                if r is None:
                    return 204, None, {}
                if r["vms"]:
                    raise ArmError(409, "OperationNotAllowed", "Capacity reservation '%s' cannot be deleted: %d virtual machine(s) are associated with it. Disassociate them first." % (name, len(r["vms"])))
                if r["state"] in ("Creating", "Updating", "Deleting"):
                    raise ArmError(409, "Conflict", "Operation on the resource is not allowed: another operation is in progress.")
                r["state"] = "Deleting"
                op_id = p.new_operation_locked(sub, r["location"], "delete", rkey, None)
                return 202, None, self.lro_headers(sub, r["location"], op_id)
        raise ArmError(405, "MethodNotAllowed", "%s is not supported here" % op)

    def scale_set_op(self, op, m, query, doc):
        p = self.peer
        sub, rg = m.group("sub"), m.group("rg")
        if op == "LIST scalesets":
            items = [p.scale_set_view(s) for (srg, _), s in sorted(p.scale_sets.items()) if srg == rg.lower()]
            return 200, {"value": items}, {}
        if op == "LIST vms":
            return self.list_vms(sub, rg, query)
        name = m.group("name")
        key = (rg.lower(), name.lower())
        if op == "GET scaleset":
            p.observe_locked(("vmss",) + key)
        s = p.scale_sets.get(key)
        not_found = ArmError(404, "ResourceNotFound", "The Resource 'Microsoft.Compute/virtualMachineScaleSets/%s' under resource group '%s' was not found." % (name, rg))
        if op == "GET scaleset":
            if s is None:
                raise not_found
            return 200, p.scale_set_view(s), {}
        if op == "PATCH scaleset":
            if s is None:
                raise not_found
            p.record["scale_set_patches"][s["name"]] = p.record["scale_set_patches"].get(s["name"], 0) + 1
            if s["state"] in ("Creating", "Updating", "Deleting"):
                raise ArmError(409, "Conflict", "Operation on the resource is not allowed: another operation is in progress.")
            sku = doc.get("sku") or {}
            if "capacity" in sku:
                s["capacity"] = int(sku["capacity"])
            if "tags" in doc:
                s["tags"] = doc["tags"]
            s["state"] = "Updating"
            op_id = p.new_operation_locked(sub, s["location"], "vmss", ("vmss",) + key, None)
            return 200, p.scale_set_view(s), self.lro_headers(sub, s["location"], op_id)
        # PUT
        self.check_scale_set_body(sub, rg, doc)
        p.record["scale_set_puts"][name] = p.record["scale_set_puts"].get(name, 0) + 1
        if s is not None and s["state"] in ("Creating", "Updating", "Deleting"):
            raise ArmError(409, "Conflict", "Operation on the resource is not allowed: another operation is in progress.")
        profile = doc["properties"]["virtualMachineProfile"]
        capacity = int(doc["sku"].get("capacity", 0))
        if s is None:
            s = p.new_scale_set_locked(sub, rg, name, doc["location"], doc["sku"]["name"], capacity,
                                       doc.get("zones"), doc.get("tags"), profile)
            status = 201
        else:
            if s["location"] != doc["location"]:
                raise ArmError(409, "InvalidResourceLocation", "The resource already exists in location %s." % s["location"])
            s.update({"sku": doc["sku"]["name"], "capacity": capacity, "tags": doc.get("tags", s["tags"]),
                      "profile": profile, "state": "Updating"})
            status = 200
        op_id = p.new_operation_locked(sub, doc["location"], "vmss", ("vmss",) + key, None)
        return status, p.scale_set_view(s), self.lro_headers(sub, doc["location"], op_id)

    def check_scale_set_body(self, sub, rg, doc):
        """Refuses what ARM refuses for a flexible scale set with a VM profile."""
        def bad(message):
            raise ArmError(400, "InvalidParameter", message)
        for field in ("location", "sku"):
            if field not in doc:
                bad("Required parameter '%s' is missing (null)." % field)
        if not (doc["sku"] or {}).get("name"):
            bad("Required parameter 'sku.name' is missing (null).")
        props = doc.get("properties") or {}
        if props.get("orchestrationMode") != "Flexible":
            bad("This peer serves flexible orchestration only (properties.orchestrationMode = Flexible).")
        if "platformFaultDomainCount" not in props:
            bad("Required parameter 'platformFaultDomainCount' is missing (null). It is required for a scale set in Flexible orchestration mode.")
        profile = props.get("virtualMachineProfile") or {}
        if not (profile.get("storageProfile") or {}).get("imageReference"):
            bad("Required parameter 'imageReference' is missing (null).")
        net = profile.get("networkProfile") or {}
        nics = net.get("networkInterfaceConfigurations") or []
        if not nics:
            bad("Required parameter 'networkProfile.networkInterfaceConfigurations' is missing (null).")
        if not net.get("networkApiVersion"):
            bad("'networkApiVersion' is required when networkInterfaceConfigurations are given in Flexible orchestration mode.")
        ipc = ((nics[0].get("properties") or {}).get("ipConfigurations") or [{}])[0]
        if not ((ipc.get("properties") or {}).get("subnet") or {}).get("id"):
            bad("Required parameter 'subnet.id' is missing (null).")
        os_profile = profile.get("osProfile") or {}
        if not os_profile.get("adminUsername"):
            bad("Required parameter 'adminUsername' is missing (null).")
        keys = (((os_profile.get("linuxConfiguration") or {}).get("ssh") or {}).get("publicKeys") or [])
        if not os_profile.get("adminPassword") and not any(k.get("keyData") for k in keys):
            bad("Authentication type is not specified: give an SSH public key or an admin password.")
        priority = profile.get("priority") or "Regular"
        if priority == "Spot":
            if profile.get("evictionPolicy") not in ("Delete", "Deallocate"):
                bad("'evictionPolicy' must be Delete or Deallocate for Spot priority.")
            if profile.get("capacityReservation"):
                bad("A Spot virtual machine cannot be associated with a capacity reservation group.")
        group = ((profile.get("capacityReservation") or {}).get("capacityReservationGroup") or {}).get("id")
        if group:
            gm = SUB_RE.match(group)
            if not gm or (rg.lower(), (gm.group("group") or "").lower()) not in self.peer.groups:
                raise ArmError(404, "CapacityReservationGroupNotFound", "Capacity reservation group '%s' was not found." % group)

    def list_vms(self, sub, rg, query):
        p = self.peer
        flt = query.get("$filter")
        expand = query.get("$expand") == "instanceView"
        if expand and not flt:
            raise ArmError(400, "InvalidParameter", "$expand=instanceView can only be specified when a valid $filter option is specified.")
        want = None
        if flt:
            fm = re.match(r"^\s*'?virtualMachineScaleSet/id'?\s+eq\s+'([^']+)'\s*$", flt, re.IGNORECASE)
            if not fm:
                raise ArmError(400, "InvalidParameter", "The $filter '%s' is not supported: only 'virtualMachineScaleSet/id' eq '<id>'." % flt)
            want = fm.group(1).lower()
        vms = [v for _, v in sorted(p.vms.items(), key=lambda kv: kv[1]["seq"])
               if v["rg"].lower() == rg.lower() and (want is None or v["vmss_id"].lower() == want)]
        if expand:
            for v in vms:
                if v["state"] == "Creating":
                    v["polls_left"] -= 1
                    if v["polls_left"] < 0:
                        v["state"] = "Succeeded"
        start = int(query.get("$skiptoken") or 0)
        page = vms[start:start + p.page_size]
        doc = {"value": [p.vm_view(v, expand) for v in page]}
        if start + p.page_size < len(vms):
            q = dict(query)
            q["$skiptoken"] = str(start + p.page_size)
            doc["nextLink"] = "http://%s%s?%s" % (self.headers.get("Host") or "127.0.0.1",
                                                 urllib.parse.urlsplit(self.path).path,
                                                 urllib.parse.urlencode(q))
        return 200, doc, {}

    def allocation_outcome(self, sku, zones):
        rule = self.peer.state_fault_locked("allocation", sku, zones)
        if rule is None:
            return None
        code = rule.get("code", "ZonalAllocationFailed" if zones else "AllocationFailed")
        return {
            "code": code,
            "message": "Allocation failed. We do not have sufficient capacity for the requested VM size %s in this %s. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance" % (sku, "zone" if zones else "region"),
        }

    def put_reservation(self, sub, rg, group, name, g, r, doc):
        p = self.peer
        if g is None:
            raise ArmError(404, "ParentResourceNotFound", "Failed to perform 'write' on resource(s) of type 'capacityReservationGroups/capacityReservations', because the parent resource '%s' could not be found." % p.group_id(sub, rg, group))
        for field in ("location", "sku"):
            if field not in doc:
                raise ArmError(400, "InvalidParameter", "Required parameter '%s' is missing (null)." % field)
        sku = doc["sku"].get("name")
        capacity = int(doc["sku"].get("capacity", 0))
        zones = doc.get("zones")
        if doc["location"] != g["location"]:
            raise ArmError(400, "InvalidParameter", "The capacity reservation must be in the location of its group (%s)." % g["location"])
        if zones and not (g["zones"] and set(zones) <= set(g["zones"])):
            raise ArmError(400, "InvalidParameter", "The zones of the capacity reservation must be among its group's zones.")
        p.record["puts"][name] = p.record["puts"].get(name, 0) + 1
        if r is not None and r["state"] in ("Creating", "Updating", "Deleting"):
            raise ArmError(409, "Conflict", "Operation on the resource is not allowed: another operation is in progress.")
        if p.state_fault_locked("quota", sku, zones):
            raise ArmError(409, "OperationNotAllowed", "Operation could not be completed as it results in exceeding approved standardNCadsH100v5Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: %s, Current Limit: 0, Current Usage: 0, Additional Required: %d." % (doc["location"], capacity * 40))
        for other in p.reservations.values():
            if (other["rg"].lower(), other["group"].lower()) == (rg.lower(), group.lower()) and other["name"].lower() != name.lower() and other["sku"].lower() == (sku or "").lower() and (other["zones"] or []) == (zones or []):
                raise ArmError(409, "OperationNotAllowed", "A capacity reservation for VM size %s already exists in this group and zone." % sku)
        rkey = (rg.lower(), group.lower(), name.lower())
        if r is None:
            r = p.new_reservation_locked(sub, rg, group, name, doc["location"], sku, capacity, zones, doc.get("tags"))
            status = 201
        else:
            r.update({"sku": sku, "capacity": capacity, "tags": doc.get("tags", r["tags"]), "state": "Updating"})
            status = 200
        outcome = self.allocation_outcome(sku, zones)
        op_id = p.new_operation_locked(sub, doc["location"], "put", rkey, outcome)
        return status, p.view(r, False), self.lro_headers(sub, doc["location"], op_id)

    def lro_headers(self, sub, location, op_id):
        base = "http://%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s" % (
            self.headers.get("Host") or "127.0.0.1", sub, location)
        return {
            "Azure-AsyncOperation": "%s/operations/%s?api-version=%s" % (base, op_id, API_VERSION),
            "Location": "%s/operationResults/%s?api-version=%s" % (base, op_id, API_VERSION),
            "Retry-After": str(self.peer.retry_after),
        }

    def operation(self, op, m):
        p = self.peer
        o = p.operations.get(m.group("id"))
        if o is None:
            raise ArmError(404, "NotFound", "The operation %s was not found." % m.group("id"))
        p.advance_locked(o)
        retry = {"Retry-After": str(p.retry_after)}
        if op == "GET operation":
            doc = {"name": o["id"], "startTime": o["start"], "status": o["status"]}
            if o["status"] != "InProgress":
                doc["endTime"] = o["end"]
            if o["status"] == "Failed":
                doc["error"] = o["error"]
            return 200, doc, retry
        if o["status"] == "InProgress":
            return 202, None, dict(retry, Location=self.headers_location())
        if o["status"] == "Failed":
            raise ArmError(400, o["error"]["code"], o["error"]["message"])
        if o["kind"] == "delete":
            return 204, None, {}
        if o["kind"] == "vmss":
            s = p.scale_sets.get(o["target"][1:])
            return 200, (p.scale_set_view(s) if s else None), {}
        r = p.reservations.get(o["target"])
        return 200, (p.view(r, False) if r else None), {}

    def headers_location(self):
        return "http://%s%s" % (self.headers.get("Host") or "127.0.0.1", self.path)

    def token(self, body):
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode()).items()}
        if form.get("grant_type") != "client_credentials" or not form.get("client_id"):
            raise ArmError(400, "invalid_request", "AADSTS900144: The request body must contain grant_type and client_id.")
        if not form.get("client_secret") and not form.get("client_assertion"):
            raise ArmError(401, "invalid_client", "AADSTS7000216: client_assertion or client_secret is required.")
        with self.peer.lock:
            self.peer.record["tokens"] += 1
        return 200, {
            "token_type": "Bearer",
            "expires_in": 3599,
            "ext_expires_in": 3599,
            "access_token": "peer-token-" + uuid.uuid4().hex,
        }, {}

    # ---- output --------------------------------------------------------------------------

    def usages(self, m, query):
        """Usage - List: the quotas set for the location, a page at a time."""
        p = self.peer
        loc = m.group("loc")
        quotas = p.usages.get(loc.lower())
        if quotas is None:
            raise ArmError(404, "ResourceNotFound", "No usages are known for location '%s'." % loc)
        items = [
            {"unit": "Count", "currentValue": 0, "limit": v, "name": {"value": n, "localizedValue": n}}
            for n, v in sorted(quotas.items())
        ]
        start = int(query.get("$skiptoken", "0") or 0)
        doc = {"value": items[start:start + p.page_size]}
        if start + p.page_size < len(items):
            q = dict(query)
            q["$skiptoken"] = str(start + p.page_size)
            doc["nextLink"] = "http://%s%s?%s" % (self.headers.get("Host") or "127.0.0.1",
                                                   urllib.parse.urlsplit(self.path).path,
                                                   urllib.parse.urlencode(q))
        return 200, doc, {}

    def send_json(self, status, doc, headers=None):
        data = b"" if doc is None else json.dumps(doc, indent=1, sort_keys=True).encode()
        self.send_response(status)
        if doc is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        request_id = str(uuid.uuid4())
        self.send_header("x-ms-request-id", request_id)
        self.send_header("x-ms-correlation-request-id", request_id)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
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
    ap = argparse.ArgumentParser(description="gpucap's local Azure ARM capacity peer")
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
