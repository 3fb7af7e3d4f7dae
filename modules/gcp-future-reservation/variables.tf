# --- gpucap traceability -------------------------------------------------------------------------

variable "plan_id" {
  description = "Id of the gpucap plan that requested this future reservation (lowercase letters, digits and hyphens, 3-63 characters; valid as a GCP label value)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.plan_id))
    error_message = "The plan_id must be 3-63 characters of lowercase letters, digits and hyphens, starting and ending with a letter or digit."
  }
}

variable "plan_fingerprint" {
  description = "Fingerprint of every input of the gpucap plan (`sha256:` followed by 64 lowercase hex digits). GCP label values cannot hold it whole, so labels carry its first 16 hex digits and the description carries all of it."
  type        = string

  validation {
    condition     = can(regex("^sha256:[0-9a-f]{64}$", var.plan_fingerprint))
    error_message = "The plan_fingerprint must look like `sha256:` followed by 64 lowercase hex digits."
  }
}

variable "labels" {
  description = "Extra labels. Future reservations have no labels field, so these (and the gpucap ones) are recorded in the description as `key=value` pairs."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k, v in var.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "Label keys must start with a lowercase letter and hold up to 63 lowercase letters, digits, `_` or `-`; values up to 63 of the same characters."
  }

  validation {
    condition     = alltrue([for k in keys(var.labels) : !startswith(k, "gpucap-")])
    error_message = "Label keys starting with `gpucap-` are set by this module."
  }
}

variable "project" {
  description = "GCP project id, or null for the provider's project."
  type        = string
  default     = null

  validation {
    condition     = var.project == null || can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "The project must be a project id: 6-30 lowercase letters, digits and hyphens, starting with a letter."
  }
}

# --- what to request -----------------------------------------------------------------------------

variable "name" {
  description = "Name of the future reservation (RFC 1035, at most 63 characters)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.name))
    error_message = "The name must match `[a-z]([-a-z0-9]*[a-z0-9])?` and be at most 63 characters."
  }
}

variable "reservation_name" {
  description = "Name of the reservation Compute Engine creates when the window starts; the pool targets it by this name."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.reservation_name))
    error_message = "The reservation_name must match `[a-z]([-a-z0-9]*[a-z0-9])?` and be at most 63 characters."
  }
}

variable "zone" {
  description = "Zone of the capacity, e.g. `us-central1-a` (calendar mode is offered in specific zones only)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone))
    error_message = "The zone must be a zone name such as `us-central1-a`."
  }
}

variable "machine_type" {
  description = "GPU machine type to reserve, e.g. `a3-megagpu-8g`."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.machine_type))
    error_message = "The machine_type must be a machine type name such as `a3-megagpu-8g`."
  }
}

variable "instance_count" {
  description = "Number of GPU VMs: 1 to 80 per calendar-mode request."
  type        = number

  validation {
    condition     = var.instance_count >= 1 && var.instance_count <= 80 && floor(var.instance_count) == var.instance_count
    error_message = "The instance_count must be a whole number from 1 to 80."
  }
}

variable "start_time" {
  description = "Start of the window (RFC 3339 UTC). Availability can be viewed up to 60 days ahead for GPUs."
  type        = string

  validation {
    condition     = can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.start_time))
    error_message = "The start_time must be an RFC 3339 UTC timestamp such as `2027-07-01T00:00:00Z`."
  }
}

variable "end_time" {
  description = "End of the window (RFC 3339 UTC), 1 to 90 days after start_time."
  type        = string

  validation {
    condition     = can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.end_time))
    error_message = "The end_time must be an RFC 3339 UTC timestamp such as `2027-07-15T00:00:00Z`."
  }
}

variable "planning_status" {
  description = "`SUBMITTED` sends the request to Google for approval (cancellable only while the start is at least 30 days away); `DRAFT` creates it without submitting, for a dry run."
  type        = string
  default     = "SUBMITTED"

  validation {
    condition     = contains(["DRAFT", "SUBMITTED"], var.planning_status)
    error_message = "The planning_status must be DRAFT or SUBMITTED."
  }
}

variable "deployment_type" {
  description = "`DENSE` places the VMs close together (what multi-node training wants); `FLEXIBLE` does not."
  type        = string
  default     = "DENSE"

  validation {
    condition     = contains(["DENSE", "FLEXIBLE"], var.deployment_type)
    error_message = "The deployment_type must be DENSE or FLEXIBLE."
  }
}
