terraform {
  # 1.5: `optional()` object attributes, preconditions and `check` blocks.
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.x and 6.x both carry every argument used here; 7.x is unreleased and unreviewed.
      version = ">= 5.40.0, < 7.0.0"
    }
  }
}
