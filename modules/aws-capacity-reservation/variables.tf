# --- gpucap traceability -------------------------------------------------------------------------

variable "plan_id" {
  description = "Id of the gpucap plan that asked for this reservation (lowercase letters, digits and hyphens, 3-63 characters). Written into the `gpucap:plan-id` tag."
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
  description = "Extra tags for the reservation (team, cost centre, campaign). The gpucap tags are added on top and cannot be overridden."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.tags) : !startswith(lower(k), "aws:") && !startswith(k, "gpucap:")])
    error_message = "Tag keys may not start with `aws:` (reserved by AWS) or `gpucap:` (set by this module)."
  }
}

# --- what to reserve -----------------------------------------------------------------------------

variable "name" {
  description = "Human-readable name, written into the `Name` tag (e.g. `h100-train-use1a`)."
  type        = string

  validation {
    condition     = length(var.name) >= 1 && length(var.name) <= 255
    error_message = "The name must be 1-255 characters long."
  }
}

variable "instance_type" {
  description = "EC2 instance type to reserve, e.g. `p5.48xlarge`."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.instance_type))
    error_message = "The instance_type must look like `family.size`, e.g. `p5.48xlarge`."
  }
}

variable "instance_platform" {
  description = "Operating system the reserved capacity is for; instances only consume the reservation when their platform matches."
  type        = string
  default     = "Linux/UNIX"

  validation {
    condition = contains([
      "Linux/UNIX",
      "Red Hat Enterprise Linux",
      "SUSE Linux",
      "Windows",
      "Windows with SQL Server",
      "Windows with SQL Server Enterprise",
      "Windows with SQL Server Standard",
      "Windows with SQL Server Web",
    ], var.instance_platform)
    error_message = "The instance_platform must be one of the platforms EC2 capacity reservations accept (e.g. `Linux/UNIX`)."
  }
}

variable "availability_zone" {
  description = "Availability Zone name to reserve in, e.g. `us-east-1a`. Reservations are zonal: the pool must launch into a subnet of this zone."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9][a-z]$", var.availability_zone))
    error_message = "The availability_zone must be a zone name such as `us-east-1a`."
  }
}

variable "instance_count" {
  description = "Number of instances to reserve (whole number, at least 1)."
  type        = number

  validation {
    condition     = var.instance_count >= 1 && floor(var.instance_count) == var.instance_count
    error_message = "The instance_count must be a whole number of at least 1."
  }
}

variable "end_date" {
  description = "When the reservation should expire (RFC 3339 UTC, e.g. `2027-03-01T00:00:00Z`); null keeps it until released. gpucap sets it to the end of the demand it covers plus a margin, so a forgotten reservation stops billing on its own."
  type        = string
  default     = null

  validation {
    condition     = var.end_date == null || can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.end_date))
    error_message = "The end_date must be an RFC 3339 UTC timestamp such as `2027-03-01T00:00:00Z`."
  }
}

variable "instance_match_criteria" {
  description = "`targeted` (default): only instances that name this reservation consume it. `open`: any matching instance in the account does."
  type        = string
  default     = "targeted"

  validation {
    condition     = contains(["targeted", "open"], var.instance_match_criteria)
    error_message = "The instance_match_criteria must be `targeted` or `open`."
  }
}

variable "tenancy" {
  description = "Tenancy of the reserved capacity: `default` (shared hardware) or `dedicated`."
  type        = string
  default     = "default"

  validation {
    condition     = contains(["default", "dedicated"], var.tenancy)
    error_message = "The tenancy must be `default` or `dedicated`."
  }
}

variable "ebs_optimized" {
  description = "Whether the reservation is for EBS-optimised instances. GPU instance types are EBS-optimised by default, so this is true unless the plan says otherwise."
  type        = bool
  default     = true
}

variable "placement_group_arn" {
  description = "ARN of a cluster placement group to reserve capacity in (for tightly coupled multi-node training), or null."
  type        = string
  default     = null

  validation {
    condition     = var.placement_group_arn == null || can(regex("^arn:aws[a-z-]*:ec2:[a-z0-9-]+:[0-9]{12}:placement-group/.+$", var.placement_group_arn))
    error_message = "The placement_group_arn must be an EC2 placement group ARN."
  }
}
