//! The `gpucap` binary: parses arguments and hands over to the library.

fn main() -> std::process::ExitCode {
    gpucap::cli::main()
}
