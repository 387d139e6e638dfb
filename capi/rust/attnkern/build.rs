//! attnkern-sys links libattnkern; its build script's rpath only reaches its
//! own binaries, so this one writes the same directory (DEP_ATTNKERN_LIBDIR)
//! into this package's tests and examples, which then run without
//! LD_LIBRARY_PATH (ELF platforms).
use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_ATTNKERN_LIBDIR");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if !(os == "linux" || os == "android" || os.ends_with("bsd")) {
        return;
    }
    if let Some(dir) = env::var_os("DEP_ATTNKERN_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.to_string_lossy());
    }
}
