# --- gpucap traceability -------------------------------------------------------------------------

variable "plan_id" {
  description = "Id of the gpucap plan that sized this pool (lowercase letters, digits and hyphens, 3-63 characters). Written into the `gpucap:plan-id` tag."
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
  description = "Extra tags for the group, its instances and volumes (team, cost centre, campaign). The gpucap tags are added on top and cannot be overridden."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.tags) : !startswith(lower(k), "aws:") && !startswith(k, "gpucap:")])
    error_message = "Tag keys may not start with `aws:` (reserved by AWS) or `gpucap:` (set by this module)."
  }
}

# --- the pool -----------------------------------------------------------------------------------

variable "name" {
  description = "Name of the Auto Scaling group (also the prefix of its launch template), e.g. `h100-train-use1`."
  type        = string

  validation {
    condition     = can(regex("^[a-zA-Z0-9][a-zA-Z0-9._-]{0,99}$", var.name))
    error_message = "The name must be 1-100 characters of letters, digits, `.`, `_` and `-`, starting with a letter or digit."
  }
}

variable "image_id" {
  description = "AMI for the GPU nodes (`ami-...`), or an SSM parameter reference such as `resolve:ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id`."
  type        = string

  validation {
    condition     = can(regex("^(ami-[0-9a-f]{8,17}|resolve:ssm:.+)$", var.image_id))
    error_message = "The image_id must be an AMI id (`ami-...`) or a `resolve:ssm:` parameter reference."
  }
}

variable "instance_types" {
  description = "Instance types the group may launch, most preferred first (the order is the on-demand priority). `weighted_capacity` (set for all or none) makes desired/min/max count units such as GPUs instead of instances."
  type = list(object({
    instance_type     = string
    weighted_capacity = optional(number)
  }))

  validation {
    condition     = length(var.instance_types) >= 1 && length(var.instance_types) <= 40
    error_message = "Give 1 to 40 instance types (the Auto Scaling limit on overrides)."
  }

  validation {
    condition     = alltrue([for t in var.instance_types : can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", t.instance_type))])
    error_message = "Each instance_type must look like `family.size`, e.g. `p5.48xlarge`."
  }

  validation {
    condition     = length(distinct([for t in var.instance_types : t.weighted_capacity == null])) == 1
    error_message = "Set weighted_capacity for every instance type or for none."
  }

  validation {
    condition     = alltrue([for t in var.instance_types : t.weighted_capacity == null || try(t.weighted_capacity >= 1 && t.weighted_capacity <= 999 && floor(t.weighted_capacity) == t.weighted_capacity, false)])
    error_message = "Each weighted_capacity must be a whole number from 1 to 999."
  }
}

variable "subnet_ids" {
  description = "Subnets (one per zone) the group launches into. With reservations or a capacity block, include a subnet in the reservation's zone."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) >= 1 && alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "Give at least one subnet id of the form `subnet-...`."
  }
}

variable "security_group_ids" {
  description = "Security groups for the nodes."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", s))])
    error_message = "Each security group id must look like `sg-...`."
  }
}

variable "iam_instance_profile_name" {
  description = "Instance profile for the nodes (checkpoint bucket access, SSM), or null."
  type        = string
  default     = null
}

variable "key_name" {
  description = "EC2 key pair for SSH, or null (prefer SSM Session Manager)."
  type        = string
  default     = null
}

variable "user_data" {
  description = "Cloud-init / shell user data in plain text (the module base64-encodes it), or null."
  type        = string
  default     = null
}

variable "root_volume" {
  description = "Root EBS volume of each node. Encrypted and deleted with the instance."
  type = object({
    device_name = optional(string, "/dev/xvda")
    size_gb     = optional(number, 200)
    type        = optional(string, "gp3")
  })
  default = {}

  validation {
    condition     = var.root_volume.size_gb >= 8 && var.root_volume.size_gb <= 16384
    error_message = "The root volume size must be 8 to 16384 GiB."
  }

  validation {
    condition     = contains(["gp2", "gp3", "io1", "io2"], var.root_volume.type)
    error_message = "The root volume type must be gp2, gp3, io1 or io2."
  }
}

variable "placement_group_name" {
  description = "Cluster placement group for tightly coupled training, or null. Not needed with a capacity block (blocks are already co-located)."
  type        = string
  default     = null
}

# --- size (gpucap's `scale-pool` action) ----------------------------------------------------------

variable "desired_capacity" {
  description = "Instances (or weight units) the plan wants running now."
  type        = number

  validation {
    condition     = var.desired_capacity >= 0 && floor(var.desired_capacity) == var.desired_capacity
    error_message = "The desired_capacity must be a whole number of at least 0."
  }
}

variable "min_size" {
  description = "Lower bound of the group."
  type        = number
  default     = 0

  validation {
    condition     = var.min_size >= 0 && floor(var.min_size) == var.min_size
    error_message = "The min_size must be a whole number of at least 0."
  }
}

variable "max_size" {
  description = "Upper bound of the group: the pool's limit in the plan."
  type        = number

  validation {
    condition     = var.max_size >= 1 && floor(var.max_size) == var.max_size
    error_message = "The max_size must be a whole number of at least 1."
  }
}

variable "health_check_grace_period" {
  description = "Seconds before a new node's health counts; GPU nodes take minutes to load drivers and fabric managers."
  type        = number
  default     = 900

  validation {
    condition     = var.health_check_grace_period >= 0 && var.health_check_grace_period <= 7200
    error_message = "The health_check_grace_period must be 0 to 7200 seconds."
  }
}

# --- purchase options -----------------------------------------------------------------------------

variable "on_demand_base_capacity" {
  description = "Capacity always filled with on-demand (or reserved) instances before any spot: the plan's firm demand."
  type        = number
  default     = 0

  validation {
    condition     = var.on_demand_base_capacity >= 0 && floor(var.on_demand_base_capacity) == var.on_demand_base_capacity
    error_message = "The on_demand_base_capacity must be a whole number of at least 0."
  }
}

variable "on_demand_percentage_above_base_capacity" {
  description = "Percentage of capacity above the base that is on-demand; the rest is spot. 100 means no spot."
  type        = number
  default     = 100

  validation {
    condition     = var.on_demand_percentage_above_base_capacity >= 0 && var.on_demand_percentage_above_base_capacity <= 100 && floor(var.on_demand_percentage_above_base_capacity) == var.on_demand_percentage_above_base_capacity
    error_message = "The on_demand_percentage_above_base_capacity must be a whole number from 0 to 100."
  }
}

variable "spot_allocation_strategy" {
  description = "How spot capacity is spread over instance pools. `price-capacity-optimized` trades a little price for far fewer interruptions, which matters more than price for long training runs."
  type        = string
  default     = "price-capacity-optimized"

  validation {
    condition     = contains(["lowest-price", "capacity-optimized", "capacity-optimized-prioritized", "price-capacity-optimized"], var.spot_allocation_strategy)
    error_message = "The spot_allocation_strategy must be lowest-price, capacity-optimized, capacity-optimized-prioritized or price-capacity-optimized."
  }
}

variable "on_demand_allocation_strategy" {
  description = "`prioritized` launches on-demand capacity in the order of instance_types; `lowest-price` picks the cheapest."
  type        = string
  default     = "prioritized"

  validation {
    condition     = contains(["prioritized", "lowest-price"], var.on_demand_allocation_strategy)
    error_message = "The on_demand_allocation_strategy must be prioritized or lowest-price."
  }
}

# --- reservations ---------------------------------------------------------------------------------

variable "capacity_reservation_ids" {
  description = "Targeted On-Demand Capacity Reservations (`cr-...`, from aws-capacity-reservation) the group's on-demand instances should run in."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for id in var.capacity_reservation_ids : can(regex("^cr-[0-9a-f]{8,17}$", id))])
    error_message = "Each capacity reservation id must look like `cr-0123456789abcdef0`."
  }
}

variable "capacity_reservation_preference" {
  description = "`capacity-reservations-first` (use the reservations, then plain on-demand), `capacity-reservations-only` (fail rather than pay on-demand), `none`, or `default` (the launch template's preference / open reservations)."
  type        = string
  default     = "default"

  validation {
    condition     = contains(["default", "capacity-reservations-first", "capacity-reservations-only", "none"], var.capacity_reservation_preference)
    error_message = "The capacity_reservation_preference must be default, capacity-reservations-first, capacity-reservations-only or none."
  }
}

variable "capacity_block_reservation_id" {
  description = "Reservation id (`cr-...`) of a capacity block (from aws-capacity-block) to run the whole group in, or null. In block mode the group launches one instance type into the block only; spot and on-demand settings do not apply."
  type        = string
  default     = null

  validation {
    condition     = var.capacity_block_reservation_id == null || can(regex("^cr-[0-9a-f]{8,17}$", var.capacity_block_reservation_id))
    error_message = "The capacity_block_reservation_id must look like `cr-0123456789abcdef0`."
  }
}

variable "capacity_block_window" {
  description = "Start and end (RFC 3339 UTC) of the capacity block. When set, scheduled actions scale the group out to desired_capacity at the start and in to zero `scale_in_lead_minutes` before the end; Terraform then leaves the desired capacity to those schedules."
  type = object({
    start = string
    end   = string
  })
  default = null

  validation {
    # can() also absorbs the attribute access on null (Terraform's || does not short-circuit).
    condition = var.capacity_block_window == null || (
      can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.capacity_block_window.start))
      && can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.capacity_block_window.end))
    )
    error_message = "The capacity_block_window start and end must be RFC 3339 UTC timestamps such as `2027-07-01T11:30:00Z`."
  }
}

variable "scale_in_lead_minutes" {
  description = "How long before the block's end the group scales in to zero. At least 35: EC2 terminates whatever still runs 30 minutes before the end, and jobs need time to checkpoint."
  type        = number
  default     = 60

  validation {
    condition     = var.scale_in_lead_minutes >= 35 && var.scale_in_lead_minutes <= 1440 && floor(var.scale_in_lead_minutes) == var.scale_in_lead_minutes
    error_message = "The scale_in_lead_minutes must be a whole number from 35 to 1440."
  }
}
