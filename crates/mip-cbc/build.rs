//! Compiles the C++ shim (`cpp/shim.cpp`) against the Cbc, Clp, Osi and CoinUtils headers that
//! `cbc-src` exports (`DEP_CBC_INCLUDE`, `DEP_CBC_COINFLAGS`). A C++ compiler is all it needs.

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=cpp/shim.cpp");
    let Some(includes) = env::var_os("DEP_CBC_INCLUDE") else {
        eprintln!(
            "gpucap-mip-cbc: cbc-src did not export its include directories (DEP_CBC_INCLUDE); \
             is a C++ compiler (g++ or clang++) installed? On Debian: `apt-get install g++`."
        );
        std::process::exit(1);
    };
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("cpp/shim.cpp")
        .warnings(false)
        .define("NDEBUG", None)
        .opt_level(3);
    if env::var("TARGET").is_ok_and(|t| t.contains("msvc")) {
        build.flag("-EHsc");
    } else {
        build.flag("-std=c++11").flag("-w");
    }
    for dir in env::split_paths(&includes) {
        build.include(dir);
    }
    if let Ok(flags) = env::var("DEP_CBC_COINFLAGS") {
        for flag in flags.split(';').filter(|f| !f.is_empty()) {
            build.define(&format!("COIN_HAS_{flag}"), None);
        }
    }
    build.compile("gpucap_mip_cbc");
}
