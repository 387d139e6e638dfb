//! Links libattnkern dynamically. ATTNKERN_LIB_DIR names the directory that
//! holds libattnkern.so (a CMake build directory or <prefix>/lib); without it
//! the linker's default search path is used.
use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=ATTNKERN_LIB_DIR");
    if let Some(dir) = env::var_os("ATTNKERN_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        // So that this package's tests and examples find the library at run
        // time without LD_LIBRARY_PATH (ELF platforms only).
        let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        if os == "linux" || os.ends_with("bsd") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
    println!("cargo:rustc-link-lib=dylib=attnkern");
}
