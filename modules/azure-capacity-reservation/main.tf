# An on-demand capacity reservation group and its reservations for the gpucap `reserve` action on
# Azure.
#
# Billing: each reserved VM is billed at the pay-as-you-go rate of its size from creation until the
# reservation is deleted, whether a VM runs in it or not (a 1- or 3-year reserved-instance term,
# bought separately, discounts that bill). There is no term, so nothing here carries
# prevent_destroy; gpucap's `release` action is a destroy.
#
# VMs and scale sets consume the capacity only when they name the group (their
# `capacity_reservation_group_id`), which is what makes the reservation targeted: other workloads
# in the subscription cannot take it. Azure refuses to delete a group while VMs are still
# associated with it, so release the pool first.

locals {
  tags = merge(var.tags, {
    "gpucap:plan-id"          = var.plan_id
    "gpucap:plan-fingerprint" = var.plan_fingerprint
    "gpucap:action"           = "reserve"
    "gpucap:module"           = "azure-capacity-reservation"
  })
}

resource "azurerm_capacity_reservation_group" "this" {
  name                = var.name
  resource_group_name = var.resource_group_name
  location            = var.location
  zones               = length(var.zones) > 0 ? var.zones : null

  tags = local.tags
}

resource "azurerm_capacity_reservation" "this" {
  for_each = var.reservations

  name                          = each.key
  capacity_reservation_group_id = azurerm_capacity_reservation_group.this.id
  zone                          = each.value.zone

  sku {
    name     = each.value.sku
    capacity = each.value.capacity
  }

  tags = local.tags

  lifecycle {
    precondition {
      condition     = length(var.zones) == 0 ? each.value.zone == null : contains(var.zones, coalesce(each.value.zone, "none"))
      error_message = "In a zonal group every reservation needs a zone from `zones`; in a regional group none may have a zone."
    }
  }
}
