# --- gpucap traceability -------------------------------------------------------------------------

variable "plan_id" {
  description = "Id of the gpucap plan that asked for this reservation (lowercase letters, digits and hyphens, 3-63 characters; valid as a GCP label value)."
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
  description = "Extra labels. Compute Engine reservations have no labels field, so these (and the gpucap ones) are recorded in the reservation's description as `key=value` pairs."
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

# --- what to reserve -----------------------------------------------------------------------------

variable "name" {
  description = "Reservation name (RFC 1035: 1-63 lowercase letters, digits and hyphens, starting with a letter). The pool targets the reservation by this name."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.name))
    error_message = "The name must match `[a-z]([-a-z0-9]*[a-z0-9])?` and be at most 63 characters."
  }
}

variable "zone" {
  description = "Zone to reserve in, e.g. `us-central1-a`. Reservations are zonal."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone))
    error_message = "The zone must be a zone name such as `us-central1-a`."
  }
}

variable "instance_count" {
  description = "Number of VMs to reserve (whole number, at least 1)."
  type        = number

  validation {
    condition     = var.instance_count >= 1 && floor(var.instance_count) == var.instance_count
    error_message = "The instance_count must be a whole number of at least 1."
  }
}

variable "machine_type" {
  description = "Machine type to reserve, e.g. `a3-highgpu-8g` (A2/A3/A4 types include their GPUs)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.machine_type))
    error_message = "The machine_type must be a machine type name such as `a3-highgpu-8g`."
  }
}

variable "guest_accelerators" {
  description = "GPUs to attach per VM, for machine types without bundled GPUs (e.g. N1 + `nvidia-tesla-t4`). Leave empty for A2/A3/A4/G2 types."
  type = list(object({
    accelerator_type  = string
    accelerator_count = number
  }))
  default = []

  validation {
    condition     = alltrue([for a in var.guest_accelerators : a.accelerator_count >= 1 && floor(a.accelerator_count) == a.accelerator_count])
    error_message = "Each accelerator_count must be a whole number of at least 1."
  }
}

variable "local_ssds" {
  description = "Local SSDs per VM (size in GiB and interface); must match what the pool's VMs attach, or they cannot consume the reservation."
  type = list(object({
    disk_size_gb = number
    interface    = optional(string, "NVME")
  }))
  default = []

  validation {
    condition     = alltrue([for d in var.local_ssds : contains(["NVME", "SCSI"], d.interface) && d.disk_size_gb > 0])
    error_message = "Each local SSD needs a positive disk_size_gb and interface NVME or SCSI."
  }
}

variable "min_cpu_platform" {
  description = "Minimum CPU platform, or null for the machine type's default."
  type        = string
  default     = null
}

variable "specific_reservation_required" {
  description = "True (default): only VMs that name this reservation consume it. False: any matching VM in the project does."
  type        = bool
  default     = true
}
