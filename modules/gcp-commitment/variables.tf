# --- gpucap traceability -------------------------------------------------------------------------

variable "plan_id" {
  description = "Id of the gpucap plan that bought this commitment (lowercase letters, digits and hyphens, 3-63 characters; valid as a GCP label value)."
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
  description = "Extra labels. Commitments have no labels field, so these (and the gpucap ones) are recorded in the description as `key=value` pairs."
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

# --- what to commit to ---------------------------------------------------------------------------

variable "name" {
  description = "Commitment name (RFC 1035, at most 63 characters)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.name))
    error_message = "The name must match `[a-z]([-a-z0-9]*[a-z0-9])?` and be at most 63 characters."
  }
}

variable "region" {
  description = "Region the commitment applies in, e.g. `us-central1`."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "The region must be a region name such as `us-central1`."
  }
}

variable "term" {
  description = "`TWELVE_MONTH` (1 year) or `THIRTY_SIX_MONTH` (3 years)."
  type        = string

  validation {
    condition     = contains(["TWELVE_MONTH", "THIRTY_SIX_MONTH"], var.term)
    error_message = "The term must be TWELVE_MONTH or THIRTY_SIX_MONTH."
  }
}

variable "type" {
  description = "Commitment type, which fixes the eligible machine series and discount: `ACCELERATOR_OPTIMIZED` for A2/A3-family GPU VMs, `GRAPHICS_OPTIMIZED_G2` for G2, and so on."
  type        = string
  default     = "ACCELERATOR_OPTIMIZED"

  validation {
    condition     = can(regex("^[A-Z][A-Z0-9_]*$", var.type))
    error_message = "The type must be a commitment type name such as `ACCELERATOR_OPTIMIZED`."
  }
}

variable "resources" {
  description = "What is committed: VCPU (count) and MEMORY (MB, a multiple of 256) together, plus ACCELERATOR (count, with accelerator_type such as `nvidia-h100-80gb`) and LOCAL_SSD (GB) as needed."
  type = list(object({
    type             = string
    amount           = number
    accelerator_type = optional(string)
  }))

  validation {
    condition     = length(var.resources) >= 1
    error_message = "Commit to at least one resource."
  }

  validation {
    condition     = alltrue([for r in var.resources : contains(["VCPU", "MEMORY", "ACCELERATOR", "LOCAL_SSD"], r.type)])
    error_message = "Each resource type must be VCPU, MEMORY, ACCELERATOR or LOCAL_SSD."
  }

  validation {
    condition     = alltrue([for r in var.resources : r.amount >= 1 && floor(r.amount) == r.amount])
    error_message = "Each amount must be a whole number of at least 1."
  }

  validation {
    condition     = alltrue([for r in var.resources : (r.type == "ACCELERATOR") == (r.accelerator_type != null)])
    error_message = "Give accelerator_type for ACCELERATOR resources, and only for them."
  }

  validation {
    condition     = contains([for r in var.resources : r.type], "VCPU") == contains([for r in var.resources : r.type], "MEMORY")
    error_message = "VCPU and MEMORY commitments must be given together."
  }

  validation {
    condition     = alltrue([for r in var.resources : r.type != "MEMORY" || r.amount % 256 == 0])
    error_message = "MEMORY is committed in MB, in multiples of 256."
  }
}

variable "existing_reservations" {
  description = "Reservation to attach (full or partial URL, e.g. the gcp-reservation module's `self_link`), or null. GPU commitments must be attached to reservations that cover the committed GPUs."
  type        = string
  default     = null
}

variable "auto_renew" {
  description = "Renew automatically at the end of the term. Off by default: a renewal is a new multi-year purchase and goes through gpucap's budget gates like any other."
  type        = bool
  default     = false
}
