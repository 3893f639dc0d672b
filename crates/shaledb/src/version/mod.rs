//! Extent metadata, versions, the manifest and the extent space.

pub mod edit;
pub mod extent_meta;
pub mod space;
#[allow(clippy::module_inception)]
pub mod version;
pub mod version_set;

pub use edit::VersionEdit;
pub use extent_meta::ExtentMeta;
pub use space::ExtentSpace;
pub use version::{CfVersion, Extent, Version};
pub use version_set::{VersionSet, DEFAULT_CF_ID, DEFAULT_CF_NAME};
