//! The hand-written modules under `modules/`, compiled into the binary so `gpucap generate`
//! can copy the ones a root module calls next to it (the default module source), and the same
//! bytes are reviewed in the repository and written into infra repositories.

use super::calls::Module;

macro_rules! module_files {
    ($dir:literal) => {
        &[
            (
                "README.md",
                include_str!(concat!("../../../modules/", $dir, "/README.md")),
            ),
            (
                "main.tf",
                include_str!(concat!("../../../modules/", $dir, "/main.tf")),
            ),
            (
                "outputs.tf",
                include_str!(concat!("../../../modules/", $dir, "/outputs.tf")),
            ),
            (
                "variables.tf",
                include_str!(concat!("../../../modules/", $dir, "/variables.tf")),
            ),
            (
                "versions.tf",
                include_str!(concat!("../../../modules/", $dir, "/versions.tf")),
            ),
        ]
    };
}

/// A module's files: (file name, content).
pub fn files(module: Module) -> &'static [(&'static str, &'static str)] {
    match module {
        Module::AwsCapacityBlock => module_files!("aws-capacity-block"),
        Module::AwsCapacityReservation => module_files!("aws-capacity-reservation"),
        Module::AwsGpuPool => module_files!("aws-gpu-pool"),
        Module::GcpFutureReservation => module_files!("gcp-future-reservation"),
        Module::GcpReservation => module_files!("gcp-reservation"),
        Module::GcpCommitment => module_files!("gcp-commitment"),
        Module::GcpGpuPool => module_files!("gcp-gpu-pool"),
        Module::AzureCapacityReservation => module_files!("azure-capacity-reservation"),
    }
}
