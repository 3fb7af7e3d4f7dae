# A GPU pool for the gpucap `scale-pool` action: a launch template and an Auto Scaling group.
#
# Two modes:
#
# * Mixed (default): a mixed instances policy buys the plan's firm demand as on-demand
#   (`on_demand_base_capacity`) and its flex demand as spot, across the listed instance types. The
#   group-level capacity reservation specification steers the on-demand part into the plan's
#   targeted reservations. Targeted, not open: the reservations are paid for whether used or not,
#   so only the pool they were bought for may consume them, and gpucap can count exactly how much
#   of the pool runs on reserved capacity.
# * Capacity block (`capacity_block_reservation_id` set): one instance type, launched only into the
#   block (market type `capacity-block`). No spot and no on-demand fallback: the block is pre-paid
#   and running outside it would pay twice. With `capacity_block_window`, scheduled actions scale
#   out when the block starts and in before it ends.

locals {
  block_mode     = var.capacity_block_reservation_id != null
  schedule_block = local.block_mode && var.capacity_block_window != null
  uses_spot      = !local.block_mode && var.on_demand_percentage_above_base_capacity < 100

  # Only emit the group-level reservation block when the plan asks for something other than the
  # default behaviour (the API rejects a target together with `none`/`default`).
  reservation_spec = !local.block_mode && (length(var.capacity_reservation_ids) > 0 || var.capacity_reservation_preference != "default")

  # With block schedules, the schedules own the group's size: Terraform leaves desired capacity
  # unset (so it does not fight the scheduled actions) and keeps min_size at zero.
  asg_desired = local.schedule_block ? null : var.desired_capacity
  asg_min     = local.schedule_block ? 0 : var.min_size

  tags = merge(var.tags, {
    Name                      = var.name
    "gpucap:plan-id"          = var.plan_id
    "gpucap:plan-fingerprint" = var.plan_fingerprint
    "gpucap:action"           = "scale-pool"
    "gpucap:module"           = "aws-gpu-pool"
  })
}

resource "aws_launch_template" "this" {
  name_prefix            = "${var.name}-"
  description            = "gpucap GPU pool ${var.name} (plan ${var.plan_id})"
  image_id               = var.image_id
  instance_type          = var.instance_types[0].instance_type
  key_name               = var.key_name
  user_data              = var.user_data == null ? null : base64encode(var.user_data)
  vpc_security_group_ids = var.security_group_ids
  ebs_optimized          = true
  update_default_version = true

  dynamic "iam_instance_profile" {
    for_each = var.iam_instance_profile_name == null ? [] : [var.iam_instance_profile_name]
    content {
      name = iam_instance_profile.value
    }
  }

  block_device_mappings {
    device_name = var.root_volume.device_name

    ebs {
      volume_size           = var.root_volume.size_gb
      volume_type           = var.root_volume.type
      encrypted             = true
      delete_on_termination = true
    }
  }

  # IMDSv2 only; a hop limit of 2 lets containers on the node reach the metadata service.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }

  dynamic "placement" {
    for_each = var.placement_group_name == null ? [] : [var.placement_group_name]
    content {
      group_name = placement.value
    }
  }

  # Instances launch into a capacity block only with this market type and the block's id as the
  # target; without them EC2 rejects the launch or, worse, bills plain on-demand.
  dynamic "instance_market_options" {
    for_each = local.block_mode ? [1] : []
    content {
      market_type = "capacity-block"
    }
  }

  dynamic "capacity_reservation_specification" {
    for_each = local.block_mode ? [var.capacity_block_reservation_id] : []
    content {
      capacity_reservation_target {
        capacity_reservation_id = capacity_reservation_specification.value
      }
    }
  }

  tag_specifications {
    resource_type = "instance"
    tags          = local.tags
  }

  tag_specifications {
    resource_type = "volume"
    tags          = local.tags
  }

  tags = local.tags
}

resource "aws_autoscaling_group" "this" {
  name                      = var.name
  min_size                  = local.asg_min
  max_size                  = var.max_size
  desired_capacity          = local.asg_desired
  vpc_zone_identifier       = var.subnet_ids
  health_check_type         = "EC2"
  health_check_grace_period = var.health_check_grace_period

  # Replace spot nodes proactively when EC2 signals an elevated interruption risk.
  capacity_rebalance = local.uses_spot

  # GPU capacity can take a long time to arrive (or not arrive at all); an apply must not hang on
  # it. gpucap watches the group's instances after the apply instead.
  wait_for_capacity_timeout = "0"

  dynamic "launch_template" {
    for_each = local.block_mode ? [1] : []
    content {
      id      = aws_launch_template.this.id
      version = aws_launch_template.this.latest_version
    }
  }

  dynamic "mixed_instances_policy" {
    for_each = local.block_mode ? [] : [1]
    content {
      instances_distribution {
        on_demand_allocation_strategy            = var.on_demand_allocation_strategy
        on_demand_base_capacity                  = var.on_demand_base_capacity
        on_demand_percentage_above_base_capacity = var.on_demand_percentage_above_base_capacity
        spot_allocation_strategy                 = var.spot_allocation_strategy
      }

      launch_template {
        launch_template_specification {
          launch_template_id = aws_launch_template.this.id
          version            = aws_launch_template.this.latest_version
        }

        dynamic "override" {
          for_each = var.instance_types
          content {
            instance_type     = override.value.instance_type
            weighted_capacity = override.value.weighted_capacity == null ? null : tostring(override.value.weighted_capacity)
          }
        }
      }
    }
  }

  dynamic "capacity_reservation_specification" {
    for_each = local.reservation_spec ? [1] : []
    content {
      capacity_reservation_preference = var.capacity_reservation_preference

      dynamic "capacity_reservation_target" {
        for_each = length(var.capacity_reservation_ids) > 0 ? [var.capacity_reservation_ids] : []
        content {
          capacity_reservation_ids = capacity_reservation_target.value
        }
      }
    }
  }

  dynamic "tag" {
    for_each = local.tags
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  lifecycle {
    precondition {
      condition     = var.min_size <= var.desired_capacity && var.desired_capacity <= var.max_size
      error_message = "The sizes must satisfy min_size <= desired_capacity <= max_size."
    }

    precondition {
      condition     = var.on_demand_base_capacity <= var.max_size
      error_message = "The on_demand_base_capacity cannot exceed max_size."
    }

    precondition {
      condition     = length(var.capacity_reservation_ids) == 0 || contains(["capacity-reservations-first", "capacity-reservations-only"], var.capacity_reservation_preference)
      error_message = "Targeting capacity_reservation_ids needs capacity_reservation_preference `capacity-reservations-first` or `capacity-reservations-only`."
    }

    precondition {
      condition     = var.capacity_reservation_preference != "capacity-reservations-only" || length(var.capacity_reservation_ids) > 0
      error_message = "The preference `capacity-reservations-only` needs at least one id in capacity_reservation_ids."
    }

    precondition {
      condition     = !local.block_mode || length(var.instance_types) == 1
      error_message = "A capacity block holds one instance type: give exactly one entry in instance_types in block mode."
    }

    precondition {
      condition     = !local.block_mode || length(var.capacity_reservation_ids) == 0
      error_message = "Block mode launches only into the capacity block; leave capacity_reservation_ids empty (use a second pool for reservations)."
    }

    precondition {
      condition     = var.capacity_block_window == null || local.block_mode
      error_message = "The capacity_block_window is only meaningful together with capacity_block_reservation_id."
    }
  }
}

# Scale out when the block starts. A start time already in the past (the block is running) is
# moved to two minutes from now, since the API refuses past start times; ignore_changes keeps that
# moved time from producing a diff on every later plan. The action's name carries the block id, so
# a new block gets new actions.
resource "aws_autoscaling_schedule" "block_start" {
  count = local.schedule_block ? 1 : 0

  scheduled_action_name  = "${var.name}-${var.capacity_block_reservation_id}-start"
  autoscaling_group_name = aws_autoscaling_group.this.name
  desired_capacity       = var.desired_capacity
  start_time             = timecmp(var.capacity_block_window.start, plantimestamp()) > 0 ? var.capacity_block_window.start : timeadd(plantimestamp(), "2m")

  lifecycle {
    ignore_changes = [start_time]
  }
}

# Scale in before EC2 starts terminating instances (30 minutes before the block ends), leaving the
# jobs `scale_in_lead_minutes` to checkpoint. After the end the block expires by itself.
resource "aws_autoscaling_schedule" "block_end" {
  count = local.schedule_block ? 1 : 0

  scheduled_action_name  = "${var.name}-${var.capacity_block_reservation_id}-end"
  autoscaling_group_name = aws_autoscaling_group.this.name
  desired_capacity       = 0
  start_time             = timeadd(var.capacity_block_window.end, "-${var.scale_in_lead_minutes}m")

  lifecycle {
    precondition {
      condition     = timecmp(timeadd(var.capacity_block_window.end, "-${var.scale_in_lead_minutes}m"), var.capacity_block_window.start) > 0
      error_message = "The capacity block window is shorter than scale_in_lead_minutes."
    }
  }
}
