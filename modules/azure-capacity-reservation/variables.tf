# --- gpucap traceability -------------------------------------------------------------------------

variable "plan_id" {
  description = "Id of the gpucap plan that asked for these reservations (lowercase letters, digits and hyphens, 3-63 characters). Written into the `gpucap:plan-id` tag."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.plan_id))
    error_message = "The plan_id must be 3-63 characters of lowercase letters, digits and hyphens, starting and ending with a letter or digit."
  }
}

variable "plan_fingerprint" {
  description = "Fingerprint of every input of the gpucap plan (`sha256:` followed by 64 lowercase hex digits). Written into the `gpucap:plan-fingerprint` tag so a reviewer can match the resource to the plan that priced it."
  type        = string

  validation {
    condition     = can(regex("^sha256:[0-9a-f]{64}$", var.plan_fingerprint))
    error_message = "The plan_fingerprint must look like `sha256:` followed by 64 lowercase hex digits."
  }
}

variable "tags" {
  description = "Extra tags for the group and its reservations (team, cost centre, campaign). The gpucap tags are added on top and cannot be overridden."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.tags) : !startswith(k, "gpucap:") && length(k) <= 512 && !can(regex("[<>%&\\\\?/]", k))])
    error_message = "Tag keys may not start with `gpucap:` (set by this module), exceed 512 characters or contain < > % & \\ ? /."
  }
}

# --- what to reserve -----------------------------------------------------------------------------

variable "name" {
  description = "Name of the capacity reservation group (1-80 letters, digits, `_`, `-`, `.`)."
  type        = string

  validation {
    condition     = can(regex("^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,79}$", var.name))
    error_message = "The name must be 1-80 characters of letters, digits, `_`, `-` and `.`, starting with a letter or digit."
  }
}

variable "resource_group_name" {
  description = "Resource group that holds the capacity reservation group."
  type        = string

  validation {
    condition     = length(var.resource_group_name) >= 1 && length(var.resource_group_name) <= 90
    error_message = "The resource_group_name must be 1-90 characters long."
  }
}

variable "location" {
  description = "Azure region, e.g. `eastus2` (the programmatic name, lowercase without spaces)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+[a-z0-9]*$", var.location))
    error_message = "The location must be a region name such as `eastus2`."
  }
}

variable "zones" {
  description = "Availability zones of the group (`1`, `2`, `3`); empty for a regional group. Zonal reservations must use one of these zones."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for z in var.zones : contains(["1", "2", "3"], z)])
    error_message = "Each zone must be `1`, `2` or `3`."
  }
}

variable "reservations" {
  description = "Reservations in the group, keyed by a stable name (the Azure resource name): VM size, instance count and, for a zonal group, the zone."
  type = map(object({
    sku      = string
    capacity = number
    zone     = optional(string)
  }))

  validation {
    condition     = length(var.reservations) >= 1
    error_message = "Give at least one reservation."
  }

  validation {
    condition     = alltrue([for k, r in var.reservations : can(regex("^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,79}$", k))])
    error_message = "Each reservation key must be 1-80 characters of letters, digits, `_`, `-` and `.`."
  }

  validation {
    condition     = alltrue([for r in var.reservations : can(regex("^Standard_[A-Za-z0-9_]+$", r.sku))])
    error_message = "Each sku must be a VM size such as `Standard_ND96isr_H100_v5`."
  }

  validation {
    condition     = alltrue([for r in var.reservations : r.capacity >= 1 && floor(r.capacity) == r.capacity])
    error_message = "Each capacity must be a whole number of at least 1."
  }

  validation {
    condition     = alltrue([for r in var.reservations : r.zone == null || contains(["1", "2", "3"], coalesce(r.zone, "1"))])
    error_message = "Each reservation zone must be `1`, `2` or `3`."
  }
}
