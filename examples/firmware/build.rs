//! Puts the memory layout where the runtime's `link.x` looks for it
//! (`memory.x` for the Cortex-M boards, `memory-riscv.x` for QEMU's RISC-V
//! `virt` board) and passes the linker scripts.
use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    // cortex-m-rt's link.x includes `memory.x`; riscv-rt's takes the layout
    // as a linker script of its own, given first.
    fs::write(out.join("memory.x"), include_bytes!("memory.x")).expect("write memory.x");
    fs::write(out.join("memory-riscv.x"), include_bytes!("memory-riscv.x"))
        .expect("write memory-riscv.x");
    println!("cargo:rustc-link-search={}", out.display());
    match arch.as_str() {
        "arm" => println!("cargo:rustc-link-arg=-Tlink.x"),
        // riscv-rt: the layout comes before its link.x.
        "riscv32" => {
            println!("cargo:rustc-link-arg=-Tmemory-riscv.x");
            println!("cargo:rustc-link-arg=-Tlink.x");
        }
        _ => {}
    }
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=memory-riscv.x");
    println!("cargo:rerun-if-changed=build.rs");
}
