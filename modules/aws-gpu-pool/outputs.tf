output "autoscaling_group_name" {
  description = "Name of the Auto Scaling group (what `gpucap apply` scales with SetDesiredCapacity)."
  value       = aws_autoscaling_group.this.name
}

output "autoscaling_group_arn" {
  description = "ARN of the Auto Scaling group."
  value       = aws_autoscaling_group.this.arn
}

output "launch_template_id" {
  description = "Id of the launch template."
  value       = aws_launch_template.this.id
}

output "launch_template_version" {
  description = "Launch template version the group uses."
  value       = aws_launch_template.this.latest_version
}

output "mode" {
  description = "`capacity-block` or `mixed`."
  value       = local.block_mode ? "capacity-block" : "mixed"
}

output "desired_capacity" {
  description = "Desired capacity the plan set (in block mode with a window, what the start schedule sets)."
  value       = var.desired_capacity
}

output "min_size" {
  description = "Lower bound of the group."
  value       = aws_autoscaling_group.this.min_size
}

output "max_size" {
  description = "Upper bound of the group."
  value       = aws_autoscaling_group.this.max_size
}

output "uses_spot" {
  description = "Whether part of the pool runs on spot."
  value       = local.uses_spot
}

output "scale_out_at" {
  description = "When the block start schedule scales the group out (RFC 3339), or null."
  value       = one(aws_autoscaling_schedule.block_start[*].start_time)
}

output "scale_in_at" {
  description = "When the block end schedule scales the group in to zero (RFC 3339), or null."
  value       = one(aws_autoscaling_schedule.block_end[*].start_time)
}

output "plan_id" {
  description = "gpucap plan id that sized this pool."
  value       = var.plan_id
}
