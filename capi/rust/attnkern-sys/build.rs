//! Links libattnkern dynamically. The library is looked up, in order, with
//! the pkg-config program (`pkg-config --libs-only-L --libs-only-l attnkern`,
//! which honours PKG_CONFIG_PATH; PKG_CONFIG names another program), in
//! ATTNKERN_LIB_DIR (a CMake build directory or <prefix>/lib), else on the
//! linker's default search path. A directory found either way is also
//! written into the test and example binaries as an rpath (ELF platforms),
//! so they run without LD_LIBRARY_PATH, and handed to dependents' build
//! scripts as DEP_ATTNKERN_LIBDIR so that they can do the same.
//!
//! No crate from crates.io: the pkg-config program is asked directly.
use std::env;
use std::process::Command;

struct Found {
    dirs: Vec<String>,
    libs: Vec<String>,
}

fn pkg_config() -> Option<Found> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out =
        Command::new(program).args(["--libs-only-L", "--libs-only-l", "attnkern"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut found = Found { dirs: Vec::new(), libs: Vec::new() };
    for flag in text.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            // A relocatable attnkern.pc says <prefix>/lib/pkgconfig/../../lib:
            // the rpath reads better resolved.
            let dir =
                std::fs::canonicalize(dir).map_or(dir.to_string(), |p| p.display().to_string());
            found.dirs.push(dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            found.libs.push(lib.to_string());
        }
    }
    if found.libs.is_empty() {
        found.libs.push("attnkern".to_string());
    }
    Some(found)
}

fn main() {
    for var in ["ATTNKERN_LIB_DIR", "PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR"] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    let found = pkg_config().unwrap_or_else(|| Found {
        dirs: env::var_os("ATTNKERN_LIB_DIR")
            .map(|d| vec![d.to_string_lossy().into_owned()])
            .unwrap_or_default(),
        libs: vec!["attnkern".to_string()],
    });
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let elf = os == "linux" || os == "android" || os.ends_with("bsd");
    for dir in &found.dirs {
        println!("cargo:rustc-link-search=native={}", dir);
        if elf {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
    if let Some(dir) = found.dirs.first() {
        println!("cargo:libdir={}", dir);
    }
    for lib in &found.libs {
        println!("cargo:rustc-link-lib=dylib={}", lib);
    }
}
