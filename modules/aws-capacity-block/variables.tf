# --- gpucap traceability -------------------------------------------------------------------------

variable "plan_id" {
  description = "Id of the gpucap plan that bought this capacity block (lowercase letters, digits and hyphens, 3-63 characters). Written into the `gpucap:plan-id` tag."
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
  description = "Extra tags for the capacity block (team, cost centre, campaign). The gpucap tags are added on top and cannot be overridden."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.tags) : !startswith(lower(k), "aws:") && !startswith(k, "gpucap:")])
    error_message = "Tag keys may not start with `aws:` (reserved by AWS) or `gpucap:` (set by this module)."
  }
}

# --- what to buy --------------------------------------------------------------------------------

variable "name" {
  description = "Human-readable name, written into the `Name` tag (e.g. `llm-pretrain-h100-july`)."
  type        = string

  validation {
    condition     = length(var.name) >= 1 && length(var.name) <= 255
    error_message = "The name must be 1-255 characters long."
  }
}

variable "instance_type" {
  description = "Instance type of the block, e.g. `p5.48xlarge`. Only some GPU/Trainium types are sold as capacity blocks, and only in some regions."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.instance_type))
    error_message = "The instance_type must look like `family.size`, e.g. `p5.48xlarge`."
  }
}

variable "instance_count" {
  description = "Instances in the block: 1 to 64 (the per-block limit; an account may hold at most 256 instances across blocks)."
  type        = number

  validation {
    condition     = var.instance_count >= 1 && var.instance_count <= 64 && floor(var.instance_count) == var.instance_count
    error_message = "The instance_count must be a whole number from 1 to 64."
  }
}

variable "capacity_duration_hours" {
  description = "Length of the block in hours: whole days (multiples of 24) up to 14 days (336 h), then whole weeks (multiples of 168) up to 182 days (4368 h), as EC2 sells them."
  type        = number

  validation {
    condition = (
      var.capacity_duration_hours >= 24
      && var.capacity_duration_hours % 24 == 0
      && (var.capacity_duration_hours <= 336 || (var.capacity_duration_hours % 168 == 0 && var.capacity_duration_hours <= 4368))
    )
    error_message = "The capacity_duration_hours must be 24-336 in steps of 24 (1-14 days), or 504-4368 in steps of 168 (3-26 weeks)."
  }
}

variable "start_date_range" {
  description = "Earliest acceptable start of the block (RFC 3339 UTC). Blocks can start up to eight weeks ahead; null means as soon as possible."
  type        = string
  default     = null

  validation {
    condition     = var.start_date_range == null || can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.start_date_range))
    error_message = "The start_date_range must be an RFC 3339 UTC timestamp such as `2027-07-01T11:30:00Z`."
  }
}

variable "end_date_range" {
  description = "Latest acceptable end of the block (RFC 3339 UTC), or null. Every block ends at 11:30 UTC."
  type        = string
  default     = null

  validation {
    condition     = var.end_date_range == null || can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.end_date_range))
    error_message = "The end_date_range must be an RFC 3339 UTC timestamp such as `2027-07-15T11:30:00Z`."
  }
}

variable "instance_platform" {
  description = "Operating system the block is bought for; instances launched into it must run this platform."
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
    error_message = "The instance_platform must be one of the platforms EC2 accepts (e.g. `Linux/UNIX`)."
  }
}

variable "max_upfront_fee_usd" {
  description = "The most this purchase may cost, in USD: the upfront fee gpucap priced in the approved plan plus its tolerance. The apply fails instead of buying when the offering found now costs more."
  type        = number

  validation {
    condition     = var.max_upfront_fee_usd > 0
    error_message = "The max_upfront_fee_usd must be a positive amount."
  }
}

variable "allowed_availability_zones" {
  description = "Zones the block may be in (e.g. those where the pool has subnets); empty accepts any zone of the region."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for z in var.allowed_availability_zones : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9][a-z]$", z))])
    error_message = "Each allowed availability zone must be a zone name such as `us-east-2a`."
  }
}

variable "capacity_block_offering_id" {
  description = "Offering id (`cb-...`) to buy, or null to look one up from the other arguments. gpucap pins the id of the block it bought here after the purchase, so later plans never query offerings (which disappear once sold) again."
  type        = string
  default     = null

  validation {
    condition     = var.capacity_block_offering_id == null || can(regex("^cb-[0-9a-f]{8,17}$", var.capacity_block_offering_id))
    error_message = "The capacity_block_offering_id must look like `cb-0123456789abcdef0`."
  }
}
