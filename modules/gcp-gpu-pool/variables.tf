# --- gpucap traceability -------------------------------------------------------------------------

variable "plan_id" {
  description = "Id of the gpucap plan that sized this pool (lowercase letters, digits and hyphens, 3-63 characters; valid as a GCP label value)."
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
  description = "Extra labels for the instance template and its VMs (team, campaign). The gpucap labels are added on top."
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

# --- the pool -----------------------------------------------------------------------------------

variable "name" {
  description = "Name of the managed instance group and base name of its VMs and templates (RFC 1035, at most 36 characters so the generated template names stay unique)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,34}[a-z0-9])?$", var.name))
    error_message = "The name must match `[a-z]([-a-z0-9]*[a-z0-9])?` and be at most 36 characters."
  }
}

variable "zone" {
  description = "Zone of the group, e.g. `us-central1-a`; reservations it consumes must be in the same zone."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone))
    error_message = "The zone must be a zone name such as `us-central1-a`."
  }
}

variable "machine_type" {
  description = "Machine type of the VMs, e.g. `a3-highgpu-8g`."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.machine_type))
    error_message = "The machine_type must be a machine type name such as `a3-highgpu-8g`."
  }
}

variable "guest_accelerators" {
  description = "GPUs to attach per VM, for machine types without bundled GPUs (e.g. N1 + `nvidia-tesla-t4`). Leave empty for A2/A3/A4/G2 types."
  type = list(object({
    type  = string
    count = number
  }))
  default = []

  validation {
    condition     = alltrue([for a in var.guest_accelerators : a.count >= 1 && floor(a.count) == a.count])
    error_message = "Each accelerator count must be a whole number of at least 1."
  }
}

variable "source_image" {
  description = "Boot image, e.g. `projects/deeplearning-platform-release/global/images/family/common-cu124-ubuntu-2204`."
  type        = string

  validation {
    condition     = length(var.source_image) > 0
    error_message = "The source_image must not be empty."
  }
}

variable "boot_disk" {
  description = "Boot disk size (GB) and type of each VM."
  type = object({
    size_gb = optional(number, 200)
    type    = optional(string, "pd-balanced")
  })
  default = {}

  validation {
    condition     = var.boot_disk.size_gb >= 10 && var.boot_disk.size_gb <= 65536
    error_message = "The boot disk size must be 10 to 65536 GB."
  }
}

variable "network" {
  description = "Network name or self link (for auto-mode networks); give subnetwork instead for custom-mode networks."
  type        = string
  default     = null
}

variable "subnetwork" {
  description = "Subnetwork name or self link in the zone's region, or null."
  type        = string
  default     = null
}

variable "service_account_email" {
  description = "Service account of the VMs (with the cloud-platform scope; grant it least-privilege roles), or null for the Compute Engine default."
  type        = string
  default     = null
}

variable "metadata" {
  description = "Instance metadata (e.g. `startup-script`, `install-nvidia-driver`)."
  type        = map(string)
  default     = {}
}

# --- size and purchase option (gpucap's `scale-pool` action) --------------------------------------

variable "provisioning" {
  description = "`standard` (on-demand, or reserved capacity via reservation_names), `spot` (preemptible, for the plan's flex demand) or `flex-start` (DWS: a queued, all-or-nothing resize request for a fixed run time)."
  type        = string
  default     = "standard"

  validation {
    condition     = contains(["standard", "spot", "flex-start"], var.provisioning)
    error_message = "The provisioning must be standard, spot or flex-start."
  }
}

variable "target_size" {
  description = "VMs the plan wants running now (standard and spot). In flex-start mode the group starts empty and the resize request adds its VMs."
  type        = number
  default     = 0

  validation {
    condition     = var.target_size >= 0 && floor(var.target_size) == var.target_size
    error_message = "The target_size must be a whole number of at least 0."
  }
}

variable "reservation_names" {
  description = "Reservations (from gcp-reservation or gcp-future-reservation) the VMs must run in. Empty: standard VMs may use any matching non-specific reservation; spot and flex-start VMs never use reservations."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for n in var.reservation_names : can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", n))])
    error_message = "Each reservation name must match `[a-z]([-a-z0-9]*[a-z0-9])?`."
  }
}

variable "spot_termination_action" {
  description = "What happens to a preempted spot VM: `DELETE` (the group recreates it when capacity returns) or `STOP`."
  type        = string
  default     = "DELETE"

  validation {
    condition     = contains(["DELETE", "STOP"], var.spot_termination_action)
    error_message = "The spot_termination_action must be DELETE or STOP."
  }
}

variable "flex_start" {
  description = "The DWS resize request (flex-start mode only): a stable request name (changing it cancels the queued request and files a new one), how many VMs to add, and how long they run (600 s to 7 days; the VMs are deleted at the end)."
  type = object({
    request_name         = string
    resize_by            = number
    run_duration_seconds = number
  })
  default = null

  validation {
    condition     = var.flex_start == null || can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.flex_start.request_name))
    error_message = "The flex_start.request_name must match `[a-z]([-a-z0-9]*[a-z0-9])?` and be at most 63 characters."
  }

  validation {
    condition     = var.flex_start == null || try(var.flex_start.resize_by >= 1 && floor(var.flex_start.resize_by) == var.flex_start.resize_by, false)
    error_message = "The flex_start.resize_by must be a whole number of at least 1."
  }

  validation {
    condition     = var.flex_start == null || try(var.flex_start.run_duration_seconds >= 600 && var.flex_start.run_duration_seconds <= 604800 && floor(var.flex_start.run_duration_seconds) == var.flex_start.run_duration_seconds, false)
    error_message = "The flex_start.run_duration_seconds must be a whole number from 600 (10 minutes) to 604800 (7 days)."
  }
}
