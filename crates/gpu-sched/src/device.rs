//! Device discovery through the CUDA driver API.

use std::fmt;

use cudarc::driver::{
    DriverError, result,
    sys::{self, CUdevice_attribute, CUresult},
};

use crate::{GpuSchedError, Result};

/// What the driver says about one CUDA device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Driver ordinal (`cuDeviceGet(ordinal)`), as `CUDA_VISIBLE_DEVICES` maps it.
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Total device memory in bytes.
    pub total_memory_bytes: u64,
    /// Compute capability `(major, minor)`, e.g. `(9, 0)` for Hopper.
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors.
    pub multiprocessors: u32,
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.compute_capability;
        let gib = self.total_memory_bytes as f64 / f64::from(1u32 << 30);
        write!(
            f,
            "GPU {}: {} (sm_{major}{minor}, {gib:.1} GiB, {} SMs)",
            self.ordinal, self.name, self.multiprocessors
        )
    }
}

/// What a look for devices found: no driver library at all, or the driver's
/// list of devices (possibly empty). Kept apart so that a skipped test and
/// `cuzk devices` can say which of the two it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The CUDA driver library (libcuda) could not be loaded.
    NoDriverLibrary,
    /// The driver's devices, in ordinal order; empty when it sees none.
    Devices(Vec<DeviceInfo>),
}

impl Probe {
    /// The devices found (none without a driver).
    pub fn devices(&self) -> &[DeviceInfo] {
        match self {
            Probe::NoDriverLibrary => &[],
            Probe::Devices(devices) => devices,
        }
    }

    /// Why no GPU can be used; `None` when there is one.
    pub fn no_gpu_reason(&self) -> Option<&'static str> {
        match self {
            Probe::NoDriverLibrary => Some("CUDA driver library (libcuda) not found"),
            Probe::Devices(devices) if devices.is_empty() => {
                Some("the CUDA driver reports no device")
            }
            Probe::Devices(_) => None,
        }
    }
}

/// Lists the CUDA devices the driver can see.
///
/// A machine without the CUDA driver library, or with the driver but no
/// device, gives `Ok(vec![])`: zero devices is a valid answer, not an error.
/// Errors are driver calls that failed, named in [`GpuSchedError`].
pub fn discover() -> Result<Vec<DeviceInfo>> {
    Ok(match probe()? {
        Probe::NoDriverLibrary => Vec::new(),
        Probe::Devices(devices) => devices,
    })
}

/// Looks for the driver library and its devices: like [`discover`], but
/// says whether an empty answer means no driver or no device.
pub fn probe() -> Result<Probe> {
    // Without libcuda, cudarc panics on the first driver call instead of
    // returning an error, so look for the library first.
    // SAFETY: this only tries to load the driver library under its usual
    // names; loading it runs libcuda's own initialisers, which every process
    // that uses CUDA runs anyway. No symbol is called.
    if !unsafe { sys::is_culib_present() } {
        return Ok(Probe::NoDriverLibrary);
    }
    match result::init() {
        Ok(()) => {}
        // The driver is installed but sees no device (e.g. none visible).
        Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => return Ok(Probe::Devices(Vec::new())),
        Err(DriverError(code)) => {
            return Err(GpuSchedError::Driver {
                call: "cuInit",
                code,
            });
        }
    }
    let count = match result::device::get_count() {
        Ok(count) => usize::try_from(count).unwrap_or(0),
        Err(DriverError(CUresult::CUDA_ERROR_NO_DEVICE)) => 0,
        Err(DriverError(code)) => {
            return Err(GpuSchedError::Driver {
                call: "cuDeviceGetCount",
                code,
            });
        }
    };
    (0..count)
        .map(device_info)
        .collect::<Result<_>>()
        .map(Probe::Devices)
}

fn device_info(ordinal: usize) -> Result<DeviceInfo> {
    let err = |call: &'static str| {
        move |DriverError(code): DriverError| GpuSchedError::DeviceQuery {
            call,
            ordinal,
            code,
        }
    };
    // `ordinal < count`, and the count came from a c_int.
    let ordinal_c = i32::try_from(ordinal).unwrap_or(i32::MAX);
    let dev = result::device::get(ordinal_c).map_err(err("cuDeviceGet"))?;
    let name = result::device::get_name(dev).map_err(err("cuDeviceGetName"))?;
    // SAFETY: `dev` was returned by cuDeviceGet for an ordinal below the
    // device count the driver reported, after a successful cuInit.
    let total = unsafe { result::device::total_mem(dev) }.map_err(err("cuDeviceTotalMem"))?;
    let attribute = |attr: CUdevice_attribute| -> Result<u32> {
        // SAFETY: as above, `dev` is a valid device handle from cuDeviceGet.
        let value = unsafe { result::device::get_attribute(dev, attr) }
            .map_err(err("cuDeviceGetAttribute"))?;
        // The driver never reports a negative count or capability.
        Ok(u32::try_from(value).unwrap_or(0))
    };
    let major = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let multiprocessors = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    Ok(DeviceInfo {
        ordinal,
        name,
        total_memory_bytes: total as u64,
        compute_capability: (major, minor),
        multiprocessors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discover_never_panics() {
        // On a machine without a driver this is Ok(empty); with one, the
        // devices it lists must be numbered 0..n.
        let devices = discover().expect("device discovery failed");
        for (i, device) in devices.iter().enumerate() {
            assert_eq!(device.ordinal, i);
            assert!(device.total_memory_bytes > 0, "{device}");
            assert!(device.compute_capability.0 > 0, "{device}");
        }
    }

    #[test]
    fn display_is_readable() {
        let device = DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H200".into(),
            total_memory_bytes: 150_110_011_392,
            compute_capability: (9, 0),
            multiprocessors: 132,
        };
        assert_eq!(
            device.to_string(),
            "GPU 0: NVIDIA H200 (sm_90, 139.8 GiB, 132 SMs)"
        );
    }
}
