output "instance_group_manager_name" {
  description = "Name of the managed instance group (what `gpucap apply` resizes)."
  value       = local.instance_group_manager.name
}

output "instance_group_manager_id" {
  description = "Id of the managed instance group."
  value       = local.instance_group_manager.id
}

output "instance_group" {
  description = "URL of the instance group the manager created."
  value       = local.instance_group_manager.instance_group
}

output "instance_template_self_link" {
  description = "Self link of the instance template in use."
  value       = google_compute_instance_template.this.self_link
}

output "provisioning" {
  description = "standard, spot or flex-start."
  value       = var.provisioning
}

output "reservation_affinity" {
  description = "ANY_RESERVATION, SPECIFIC_RESERVATION or NO_RESERVATION."
  value       = local.reservation_affinity
}

output "target_size" {
  description = "Target size the plan set (0 in flex-start mode, where the resize request adds VMs)."
  value       = local.flex ? 0 : var.target_size
}

output "resize_request_id" {
  description = "Id of the DWS resize request, or null outside flex-start mode."
  value       = one(google_compute_resize_request.this[*].id)
}

output "resize_request_state" {
  description = "State of the resize request (e.g. ACCEPTED while queued, SUCCEEDED, FAILED), or null."
  value       = one(google_compute_resize_request.this[*].state)
}

output "plan_id" {
  description = "gpucap plan id that sized this pool."
  value       = var.plan_id
}
