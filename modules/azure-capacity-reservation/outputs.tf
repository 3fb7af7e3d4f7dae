output "capacity_reservation_group_id" {
  description = "Id of the group; VMs and scale sets consume the capacity by setting their `capacity_reservation_group_id` to it."
  value       = azurerm_capacity_reservation_group.this.id
}

output "reservation_ids" {
  description = "Id of each reservation, by key."
  value       = { for k, r in azurerm_capacity_reservation.this : k => r.id }
}

output "reserved_instances" {
  description = "Reserved VMs per size (billed at pay-as-you-go rates, used or not)."
  value       = { for sku in distinct([for r in var.reservations : r.sku]) : sku => sum([for r in var.reservations : r.capacity if r.sku == sku]) }
}

output "location" {
  description = "Region of the group."
  value       = azurerm_capacity_reservation_group.this.location
}

output "plan_id" {
  description = "gpucap plan id these reservations were made for."
  value       = var.plan_id
}
