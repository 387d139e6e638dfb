//! The raw declarations link and run without the safe layer: this binary
//! finds libattnkern through the rpath build.rs wrote (no LD_LIBRARY_PATH).
use attnkern_sys as sys;
use std::ffi::CStr;

#[test]
fn version_and_abi() {
    assert_eq!(unsafe { sys::ak_abi_version() }, sys::AK_ABI_VERSION);
    let v = unsafe { CStr::from_ptr(sys::ak_version()) }.to_str().unwrap();
    assert_eq!(v.split('.').count(), 3, "{}", v);
}

#[test]
fn blocking_and_its_null_pointer() {
    let mut blk = sys::ak_sgemm_blocking::default();
    assert_eq!(unsafe { sys::ak_sgemm_get_blocking(&mut blk) }, sys::ak_status::AK_OK);
    assert!(blk.mr > 0 && blk.nr > 0, "{:?}", blk);
    let st = unsafe { sys::ak_sgemm_get_blocking(std::ptr::null_mut()) };
    assert_eq!(st, sys::ak_status::AK_ERR_NULL_POINTER);
}

#[test]
fn the_0_1_desc_init_fills_the_0_1_prefix() {
    let mut d = std::mem::MaybeUninit::<sys::ak_attention_desc>::zeroed();
    let d = unsafe {
        sys::ak_attention_desc_init(d.as_mut_ptr());
        d.assume_init()
    };
    assert_eq!(d.struct_size, sys::ak_attention_desc_size_0_1());
    assert_eq!((d.window_left, d.window_right), (-1, -1));
}

#[test]
fn optional_functions_are_found() {
    assert!(sys::ak_convert().is_some());
    assert!(sys::ak_kv_cache_store().is_some());
    assert!(sys::ak_rope().is_some());
    assert!(sys::ak_embedding().is_some());
}
